#pragma once
/// A cost model per operator class (docs/simulate.md, "Costs: measured, given or derived"): each class of
/// operators (core/model/flop_counter.h's OpClass: a layer's GEMMs, attention's products of
/// two activations, convolutions dense, depthwise and 1 x 1, recurrent steps) computes at
/// its own fraction of the device's rate, and the kernels that count no FLOPs (element-wise,
/// normalisation, softmax, pooling, gathers) move their bytes at a fraction of its memory
/// bandwidth. Small depthwise convolutions reach a few percent of what a large GEMM does; one
/// efficiency for every operator prices them alike. A cluster file's `device.classes` gives
/// the fractions (`pipelab calibrate` fits them from traced runs); without it a block is one
/// roofline, as before.
#include <array>
#include <string>

#include "core/config/fields.h"
#include "core/model/flop_counter.h"
#include "tools/describe/model_profile.h"

namespace pipelab::sim {

/// How one pass (a forward, or a backward) computes each class.
struct PassRates {
  /// Per OpClass, its fraction of the device's rate (device.tflops), at most 1; 0: not given.
  std::array<double, kOpClasses> compute{};
  /// Per OpClass, microseconds each call takes beyond its FLOPs at that rate (a small
  /// product's set-up and tail: the class's rate at a size is its large-size rate times
  /// flops / (flops + rate x this)), on top of the launch every kernel pays.
  std::array<double, kOpClasses> call_us{};
  /// The memory-bound kernels' fraction of the device's bandwidth (device.memory_gbs); 0: not given.
  double memory = 0;
};

struct ClassRates {
  PassRates forward;
  /// A backward's, for twice the forward's FLOPs and bytes (its input's and its weights'
  /// gradients); a class not given here computes at its forward's rate.
  PassRates backward;
  /// The optimizer's update: its fraction of device.memory_gbs as it streams the weights, their
  /// gradient and its state; 0: all of it.
  double update = 0;
  /// Whether a cluster file gave them (then every block is priced by class).
  bool given() const;
  template <class V>
  void fields(V& v) {
    for (size_t c = 0; c < kOpClasses; ++c) {
      const std::string name = op_class_name(static_cast<OpClass>(c));
      v(name, forward.compute[c],
        "this operator class's fraction of device.tflops in a forward, at most 1 (0 or absent: the device's own rate)",
        in_range(0, 1));
      v(name + "_call_us", forward.call_us[c], "microseconds each call of this class takes in a forward beyond its FLOPs",
        in_range(0, 1e6));
      v(name + "_backward", backward.compute[c],
        "its fraction of device.tflops in a backward, at most 1 (0 or absent: its forward's)", in_range(0, 1));
      v(name + "_backward_call_us", backward.call_us[c],
        "microseconds each call of it takes in a backward beyond its FLOPs (absent: its forward's)", in_range(0, 1e6));
    }
    v("memory", forward.memory,
      "the memory-bound kernels' fraction of device.memory_gbs in a forward, at most 1 (0 or absent: all of it)",
      in_range(0, 1));
    v("memory_backward", backward.memory, "the same in a backward (0 or absent: the forward's)", in_range(0, 1));
    v("update", update, "the optimizer's update's fraction of device.memory_gbs (0 or absent: all of it)",
      in_range(0, 1));
  }
};

/// The device a block's classes are priced on.
struct ClassDevice {
  double rate = 0;       ///< FLOP/s of the run's precision
  /// FLOP/s of dense and 1 x 1 convolutions where they compute apart (TensorFloat-32 under
  /// float32 on Ampere and later: cuDNN's default, LibTorch's too); 0: `rate`.
  double convolution_rate = 0;
  double bandwidth = 0;  ///< bytes/s (0: bytes are free)
  double byte_scale = 1; ///< the run's bytes per element over the profile's 4
  double rate_of(OpClass c) const;
};

/// What one action of a block takes, per operator class, for `examples` examples. Each class
/// is a roofline of its own: the slower of its FLOPs at its rate and its operands' bytes
/// (what its products read and write) at the memory rate, plus its calls' fixed time; the
/// kernels that count no FLOPs move their bytes at the memory rate. A backward's input
/// gradients (I) compute each product once and attention's twice (both operands are
/// activations) and move the element-wise bytes twice; its weight gradients (W) compute every
/// product that reads a weight once more; each call pays its class's fixed time as often. A
/// class whose backward rates are given costs its backward's time, split between I and W as
/// its FLOPs are.
struct ClassSeconds {
  double forward = 0, input_backward = 0, weight_backward = 0;
};
ClassSeconds class_seconds(const BlockProfile& block, double examples, const ClassRates& rates, const ClassDevice& device);

}  // namespace pipelab::sim
