#pragma once
/// `pipelab calibrate`'s fit: the rates per operator class (tools/simulate/class_rates.h) and
/// the host costs per kernel and per action that best explain the forward and backward
/// seconds traced runs measured on one device, stage by stage, from what each stage's blocks
/// compute (their profile from shapes). Each stage gives two equations, in seconds per
/// micro-batch, each pass with unknowns of its own but the host's:
///
///   forward  = sum_c (flops_c s_c + calls_c t_c) + bytes m + kernels k + a
///   backward = sum_c (2 flops_c s'_c + 2 calls_c t'_c) + 2 bytes m' + 2 kernels k + a
///   update   = parameter bytes (3 + 2 states) u + a
///
/// (t_c a call's fixed time in class c: what makes a small product slower per FLOP than a
/// large one; a backward computes twice the products, for the input's gradient and the
/// weights', and runs about two kernels per forward one; an update streams the weights,
/// their gradient and each state as derived costs price it, and its bandwidth 1/u becomes the
/// device's memory_gbs: docs/simulate.md, "Calibrated costs"), fitted with every unknown >= 0, each equation weighted by its own size (relative
/// errors: a small stage counts as much as a large one).
#include <array>
#include <string>
#include <vector>

#include "core/model/flop_counter.h"
#include "tools/simulate/cluster.h"

namespace pipelab::sim {

/// One stage of one measured run: what its blocks compute per example, and what it took.
struct StageSample {
  std::string run;  ///< where it came from, for messages
  std::array<double, kOpClasses> flops{};  ///< per example
  std::array<double, kOpClasses> calls{};  ///< per micro-batch
  /// Per example: the activations in and out of the kernels that compute no products. A
  /// product's operands are not counted: derived costs price a class as the slower of its
  /// FLOPs and its bytes, and the fit takes the FLOPs' side (its own runs' products compute
  /// long enough for it: class_rates.h).
  double memory_bytes = 0;
  double weight_bytes = 0;                 ///< per micro-batch: the weights a pass reads once
  double kernels = 0;                      ///< per micro-batch
  double examples = 0;                     ///< per micro-batch
  double forward = 0, backward = 0;        ///< measured seconds per micro-batch
  double update_bytes = 0;                 ///< what its optimizer step reads and writes
  double update = 0;                       ///< measured seconds per step
};

/// One pass's fitted seconds per unit.
struct PassFit {
  std::array<double, kOpClasses> per_flop{}, per_call{};
  double per_byte = 0;
};

struct Calibration {
  PassFit forward, backward;
  std::array<bool, kOpClasses> seen{};  ///< some stage computed this class
  bool memory_seen = false;
  double launch_seconds = 0, action_seconds = 0;
  double update_seconds_per_byte = 0;
  /// Over the equations: the root mean square of predicted / measured - 1.
  double rms_error = 0;
  /// The seconds the fit predicts for `s`'s forward and backward.
  std::pair<double, double> predict(const StageSample& s) const;
  double predict_update(const StageSample& s) const;
};

/// What the fit may use.
struct CalibrationOptions {
  /// Every product counts as a GEMM: one rate for all of them (what derived costs assumed
  /// before there were classes), for comparison.
  bool one_class = false;
  /// Fit 1 x 1 convolutions with the GEMMs (a 1 x 1 convolution is a matrix product of the
  /// channels): a class of their own needs many models with them to be told apart, and
  /// fitted apart from MobileNetV2 and a separable CNN alone it missed both left-out by 2x
  /// (docs/simulate.md, "Calibrated costs").
  bool pointwise_as_gemm = true;
};
Calibration fit_calibration(std::vector<StageSample> samples, const CalibrationOptions& options = {});

/// The device section the fit gives: `tflops` in `dtype` the fastest class's rate, each
/// class's fraction of it, the memory-bound kernels' bandwidth, the host costs; a class no
/// run computed is left out (the device's rate).
ClusterDevice calibrated_device(const Calibration& fit, const std::string& dtype, double memory_gib);

}  // namespace pipelab::sim
