#include "tools/simulate/class_rates.h"

namespace pipelab::sim {
namespace {

bool any(const PassRates& p) {
  if (p.memory > 0) return true;
  for (size_t c = 0; c < kOpClasses; ++c) {
    if (p.compute[c] > 0 || p.call_us[c] > 0) return true;
  }
  return false;
}

/// Seconds of `flops` FLOPs in `calls` calls at `fraction` of `rate` (0: all of it).
double seconds_of(double flops, double calls, double rate, double fraction, double call_us) {
  return flops / (rate * (fraction > 0 ? fraction : 1.0)) + calls * call_us * 1e-6;
}

}  // namespace

bool ClassRates::given() const { return any(forward) || any(backward) || update > 0; }

ClassSeconds class_seconds(const BlockProfile& block, double examples, const ClassRates& rates, double rate,
                           double bandwidth, double byte_scale) {
  ClassSeconds out;
  for (size_t c = 0; c < kOpClasses; ++c) {
    const double flops = static_cast<double>(block.class_flops[c]) * examples;
    const double calls = static_cast<double>(block.class_calls[c]);
    if (flops <= 0) continue;
    const bool attention = static_cast<OpClass>(c) == OpClass::Attention;
    const double forward = seconds_of(flops, calls, rate, rates.forward.compute[c], rates.forward.call_us[c]);
    out.forward += forward;
    // The backward: twice the FLOPs and calls, at its own rates where given.
    const bool own = rates.backward.compute[c] > 0 || rates.backward.call_us[c] > 0;
    const double backward =
        own ? seconds_of(2 * flops, 2 * calls, rate, rates.backward.compute[c], rates.backward.call_us[c]) : 2 * forward;
    out.input_backward += attention ? backward : backward / 2;
    if (!attention) out.weight_backward += backward / 2;
  }
  if (bandwidth > 0) {
    // Every kernel's bytes: the memory-bound ones' and the products' operands and results.
    double per_example = static_cast<double>(block.memory_bytes);
    for (const int64_t b : block.class_bytes) per_example += static_cast<double>(b);
    // ... and the weights, read once a pass (float32 master weights).
    const double bytes = per_example * examples * byte_scale + 4.0 * static_cast<double>(block.parameters);
    const double forward = bytes / (bandwidth * (rates.forward.memory > 0 ? rates.forward.memory : 1.0));
    const double backward = rates.backward.memory > 0 ? 2 * bytes / (bandwidth * rates.backward.memory) : 2 * forward;
    out.forward += forward;
    out.input_backward += backward;
  }
  return out;
}

}  // namespace pipelab::sim
