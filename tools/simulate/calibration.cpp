#include "tools/simulate/calibration.h"

#include <algorithm>
#include <cmath>

#include "core/util/error.h"
#include "tools/simulate/nnls.h"

namespace pipelab::sim {
namespace {

// The unknowns: per pass (forward, then backward) each class's FLOPs and calls, and the
// bytes; then the host's per kernel and per action, and the update's per byte.
constexpr size_t kPass = 2 * kOpClasses + 1;
constexpr size_t kKernelColumn = 2 * kPass, kActionColumn = 2 * kPass + 1, kUpdateColumn = 2 * kPass + 2;
constexpr size_t kUnknowns = 2 * kPass + 3;

/// The equation's coefficients for `s`'s forward (`backward` false) or backward.
std::array<double, kUnknowns> row_of(const StageSample& s, bool backward) {
  std::array<double, kUnknowns> row{};
  const double factor = backward ? 2 : 1;
  const size_t at = backward ? kPass : 0;
  for (size_t c = 0; c < kOpClasses; ++c) {
    row[at + c] = factor * s.flops[c] * s.examples;
    row[at + kOpClasses + c] = factor * s.calls[c];
  }
  row[at + 2 * kOpClasses] = factor * (s.memory_bytes * s.examples + s.weight_bytes);
  row[kKernelColumn] = factor * s.kernels;
  row[kActionColumn] = 1;
  return row;
}

/// The equation of `s`'s update.
std::array<double, kUnknowns> update_row(const StageSample& s) {
  std::array<double, kUnknowns> row{};
  row[kUpdateColumn] = s.update_bytes;
  row[kActionColumn] = 1;
  return row;
}

std::vector<double> unknowns_of(const Calibration& fit) {
  std::vector<double> x;
  for (const PassFit* p : {&fit.forward, &fit.backward}) {
    x.insert(x.end(), p->per_flop.begin(), p->per_flop.end());
    x.insert(x.end(), p->per_call.begin(), p->per_call.end());
    x.push_back(p->per_byte);
  }
  x.push_back(fit.launch_seconds);
  x.push_back(fit.action_seconds);
  x.push_back(fit.update_seconds_per_byte);
  return x;
}

void read_unknowns(const std::vector<double>& x, Calibration& fit) {
  size_t at = 0;
  for (PassFit* p : {&fit.forward, &fit.backward}) {
    for (size_t c = 0; c < kOpClasses; ++c) {
      p->per_flop[c] = x[at + c];
      p->per_call[c] = x[at + kOpClasses + c];
    }
    p->per_byte = x[at + 2 * kOpClasses];
    at += kPass;
  }
  fit.launch_seconds = x[kKernelColumn];
  fit.action_seconds = x[kActionColumn];
  fit.update_seconds_per_byte = x[kUpdateColumn];
}

double dot(const std::array<double, kUnknowns>& row, const std::vector<double>& x) {
  double out = 0;
  for (size_t j = 0; j < kUnknowns; ++j) out += row[j] * x[j];
  return out;
}

constexpr size_t kGemm = static_cast<size_t>(OpClass::Gemm);

/// Class `c`'s products counted as GEMMs.
void into_gemm(StageSample& s, size_t c) {
  s.flops[kGemm] += s.flops[c];
  s.calls[kGemm] += s.calls[c];
  s.flops[c] = s.calls[c] = 0;
}

/// The classes folded into the GEMMs take the GEMMs' fit.
void as_gemm(PassFit& p, size_t c) {
  p.per_flop[c] = p.per_flop[kGemm];
  p.per_call[c] = p.per_call[kGemm];
}

}  // namespace

std::pair<double, double> Calibration::predict(const StageSample& s) const {
  const std::vector<double> x = unknowns_of(*this);
  return {dot(row_of(s, false), x), dot(row_of(s, true), x)};
}

double Calibration::predict_update(const StageSample& s) const { return dot(update_row(s), unknowns_of(*this)); }

Calibration fit_calibration(std::vector<StageSample> samples, const CalibrationOptions& options) {
  std::vector<size_t> folded;  // the classes fitted with the GEMMs
  for (size_t c = 0; c < kOpClasses; ++c) {
    const bool pointwise = static_cast<OpClass>(c) == OpClass::PointwiseConv;
    if (c != kGemm && (options.one_class || (pointwise && options.pointwise_as_gemm))) folded.push_back(c);
  }
  PIPELAB_ASSERT(!samples.empty(), "calibration without samples");
  std::vector<double> a, b;
  Calibration out;
  for (StageSample& s : samples) {
    for (size_t c = 0; c < kOpClasses; ++c) out.seen[c] = out.seen[c] || s.flops[c] > 0;
    out.memory_seen = out.memory_seen || s.memory_bytes > 0;
    for (const size_t c : folded) into_gemm(s, c);
    // Each equation divided by what it measured: the fit minimises relative errors.
    for (const bool backward : {false, true}) {
      const double seconds = backward ? s.backward : s.forward;
      if (seconds <= 0) continue;
      for (const double v : row_of(s, backward)) a.push_back(v / seconds);
      b.push_back(1.0);
    }
    if (s.update > 0 && s.update_bytes > 0) {
      for (const double v : update_row(s)) a.push_back(v / s.update);
      b.push_back(1.0);
    }
  }
  // In units the solver handles alike: each column scaled to its largest entry.
  std::vector<double> scale(kUnknowns, 0.0);
  for (size_t i = 0; i < a.size(); ++i) scale[i % kUnknowns] = std::max(scale[i % kUnknowns], std::abs(a[i]));
  for (size_t i = 0; i < a.size(); ++i) a[i] = scale[i % kUnknowns] > 0 ? a[i] / scale[i % kUnknowns] : 0.0;
  std::vector<double> x = nnls(a, b);
  for (size_t j = 0; j < kUnknowns; ++j) x[j] = scale[j] > 0 ? x[j] / scale[j] : 0.0;
  read_unknowns(x, out);
  for (const size_t c : folded) {
    as_gemm(out.forward, c);
    as_gemm(out.backward, c);
  }
  double squares = 0;
  size_t n = 0;
  for (const StageSample& s : samples) {
    const auto [forward, backward] = out.predict(s);
    for (const auto& [p, m] : {std::pair{forward, s.forward}, std::pair{backward, s.backward},
                               std::pair{out.predict_update(s), s.update}}) {
      if (m <= 0) continue;
      squares += (p / m - 1) * (p / m - 1);
      ++n;
    }
  }
  out.rms_error = n ? std::sqrt(squares / static_cast<double>(n)) : 0.0;
  return out;
}

ClusterDevice calibrated_device(const Calibration& fit, const std::string& dtype, double memory_gib) {
  double fastest = 0, widest = 0;  // FLOP/s, bytes/s
  for (const PassFit* p : {&fit.forward, &fit.backward}) {
    for (size_t c = 0; c < kOpClasses; ++c) {
      if (fit.seen[c] && p->per_flop[c] > 0) fastest = std::max(fastest, 1 / p->per_flop[c]);
    }
  }
  // The device's bandwidth: the fastest of the kernels' and the update's; each its fraction.
  for (const PassFit* p : {&fit.forward, &fit.backward}) {
    if (p->per_byte > 0) widest = std::max(widest, 1 / p->per_byte);
  }
  if (fit.update_seconds_per_byte > 0) widest = std::max(widest, 1 / fit.update_seconds_per_byte);
  PIPELAB_ASSERT(fastest > 0, "a calibration whose every class is free");
  ClusterDevice d;
  const double tflops = fastest / 1e12;
  (dtype == "bfloat16" ? d.tflops.bfloat16 : dtype == "float16" ? d.tflops.float16 : d.tflops.float32) = tflops;
  const auto pass = [&](const PassFit& p, PassRates& r) {
    for (size_t c = 0; c < kOpClasses; ++c) {
      if (!fit.seen[c]) continue;
      // A class the fit found free (its seconds too few to tell) computes at the fastest rate.
      r.compute[c] = p.per_flop[c] > 0 ? 1 / p.per_flop[c] / fastest : 1.0;
      r.call_us[c] = p.per_call[c] * 1e6;
    }
    if (fit.memory_seen) r.memory = p.per_byte > 0 ? 1 / p.per_byte / widest : 1.0;
  };
  pass(fit.forward, d.classes.forward);
  pass(fit.backward, d.classes.backward);
  // Memory-bound kernels too few to tell: the bandwidth is left unbounded in practice.
  d.memory_gbs = widest > 0 ? widest / 1e9 : 1e6;
  if (fit.update_seconds_per_byte > 0) d.classes.update = 1 / fit.update_seconds_per_byte / widest;
  d.memory_gib = memory_gib;
  d.launch_us = fit.launch_seconds * 1e6;
  d.action_us = fit.action_seconds * 1e6;
  return d;
}

}  // namespace pipelab::sim
