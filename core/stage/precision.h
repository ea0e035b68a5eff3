#pragma once
/// Mixed precision for a stage (`run.amp`): which autocast dtype its forward runs under,
/// and, for fp16, the stage's own dynamic loss scaler.
///
/// Master weights, optimizer state and the weight policies' copies (stashes, predictions)
/// stay in the parameters' dtype (float32): autocast only casts inside the forward, as
/// PyTorch's torch.autocast does. Under fp16 each stage scales the gradient it starts its
/// backward from by its own scale S (the loss on the last stage, the incoming gradient
/// elsewhere), unscales its parameter gradients before the update and skips the update
/// when any of them is not finite (torch.cuda.amp.GradScaler's rule, per stage). The
/// gradient a stage sends back is unscaled and float32, so neighbours need not agree on
/// a scale: a stage that overflows backs off alone, as stages of an asynchronous
/// pipeline update alone. With equal scales and no overflow this is exactly one global
/// scaler, since multiplying and dividing by a power of two is exact.
#include <ATen/Tensor.h>

#include <string>

#include <optional>
#include <vector>

#include "core/config/fields.h"

namespace pipelab {

/// `run.amp`.
enum class Amp { None, Bf16, Fp16 };

/// `run.loss_scale` (fp16 only); defaults are torch.amp.GradScaler's.
struct LossScaleOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;
  template <class V>
  void fields(V& v) {
    v("init_scale", init_scale, "fp16: the loss scale each stage starts with", positive);
    v("growth_factor", growth_factor, "fp16: the scale is multiplied by this after growth_interval finite updates",
      [](double x) { return std::string(x > 1 ? "" : "a number > 1"); });
    v("backoff_factor", backoff_factor, "fp16: the scale is multiplied by this when a gradient overflows",
      in_half_open(0.0, 1.0));
    v("growth_interval", growth_interval, "fp16: finite updates in a row before the scale grows", positive);
  }
};

/// The autocast dtype of `amp` (nullopt for none).
std::optional<at::ScalarType> autocast_dtype(Amp amp);

/// A stage's precision settings.
struct Precision {
  Amp amp = Amp::None;
  LossScaleOptions loss_scale;
};

/// One stage's dynamic loss scale.
class LossScaler {
 public:
  explicit LossScaler(LossScaleOptions options);
  double scale() const { return scale_; }
  /// Divides every defined gradient of `params` by the scale; true when all are finite.
  bool unscale(const std::vector<at::Tensor>& params) const;
  /// After an update attempt: back off on overflow, grow after growth_interval good steps.
  void update(bool finite);
  /// Updates skipped for overflow so far.
  int64_t skipped() const { return skipped_; }
  /// [scale, good steps in a row, skipped] as a float64 tensor, for checkpoints.
  at::Tensor state() const;
  void load_state(const at::Tensor& state);

 private:
  LossScaleOptions o_;
  double scale_;
  int64_t good_ = 0, skipped_ = 0;
};

}  // namespace pipelab
