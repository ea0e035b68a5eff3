#include "tools/simulate/class_rates.h"

#include <algorithm>

namespace pipelab::sim {
namespace {

bool any(const PassRates& p) {
  if (p.memory > 0) return true;
  for (size_t c = 0; c < kOpClasses; ++c) {
    if (p.compute[c] > 0 || p.call_us[c] > 0) return true;
  }
  return false;
}

/// Seconds of `flops` FLOPs at `fraction` of `rate` (0: all of it).
double flops_seconds(double flops, double rate, double fraction) {
  return flops / (rate * (fraction > 0 ? fraction : 1.0));
}

}  // namespace

bool ClassRates::given() const { return any(forward) || any(backward) || update > 0; }

double ClassDevice::rate_of(OpClass c) const {
  // Depthwise convolutions have no tensor-core path: they stay at the precision's own rate.
  const bool tensor_cores = c == OpClass::Conv || c == OpClass::PointwiseConv;
  return tensor_cores && convolution_rate > 0 ? convolution_rate : rate;
}

ClassSeconds class_seconds(const BlockProfile& block, double examples, const ClassRates& rates, const ClassDevice& device) {
  ClassSeconds out;
  const auto memory_rate = [&](const PassRates& p) { return device.bandwidth * (p.memory > 0 ? p.memory : 1.0); };
  const double forward_bw = memory_rate(rates.forward);
  const double backward_bw = rates.backward.memory > 0 ? memory_rate(rates.backward) : forward_bw;
  // Bytes at a bandwidth; free where none is given.
  const auto moving = [&](double bytes, double bw) { return device.bandwidth > 0 ? bytes / bw : 0.0; };
  for (size_t c = 0; c < kOpClasses; ++c) {
    const double flops = static_cast<double>(block.class_flops[c]) * examples;
    if (flops <= 0) continue;
    const double calls = static_cast<double>(block.class_calls[c]);
    const double operands = static_cast<double>(block.class_bytes[c]) * examples * device.byte_scale;
    const double rate = device.rate_of(static_cast<OpClass>(c));
    // A kernel of the class is as slow as the slower of its FLOPs and its operands' bytes.
    const auto pass = [&](double work, const PassRates& p, double bw) {
      return std::max(flops_seconds(work * flops, rate, p.compute[c]), moving(work * operands, bw)) +
             work * calls * p.call_us[c] * 1e-6;
    };
    const double forward = pass(1, rates.forward, forward_bw);
    out.forward += forward;
    // The backward: twice the FLOPs, the bytes and the calls, at its own rates where given.
    const bool own = rates.backward.compute[c] > 0 || rates.backward.call_us[c] > 0;
    const double backward = own ? pass(2, rates.backward, backward_bw) : 2 * forward;
    const bool attention = static_cast<OpClass>(c) == OpClass::Attention;
    out.input_backward += attention ? backward : backward / 2;
    if (!attention) out.weight_backward += backward / 2;
  }
  // The kernels that compute no products (normalisations, activations, additions, pooling,
  // gathers) move their bytes; and the weights are read once a pass (float32 master weights).
  const double bytes = static_cast<double>(block.memory_bytes) * examples * device.byte_scale +
                       4.0 * static_cast<double>(block.parameters);
  out.forward += moving(bytes, forward_bw);
  out.input_backward += moving(2 * bytes, backward_bw);
  return out;
}

}  // namespace pipelab::sim
