#include "core/stage/precision.h"

#include <ATen/ATen.h>

#include "core/util/error.h"

namespace pipelab {

std::optional<at::ScalarType> autocast_dtype(Amp amp) {
  switch (amp) {
    case Amp::Bf16: return at::kBFloat16;
    case Amp::Fp16: return at::kHalf;
    case Amp::None: break;
  }
  return std::nullopt;
}

LossScaler::LossScaler(LossScaleOptions options) : o_(options), scale_(options.init_scale) {}

bool LossScaler::unscale(const std::vector<at::Tensor>& params) const {
  at::NoGradGuard no_grad;
  const double inverse = 1.0 / scale_;
  std::vector<at::Tensor> finite;
  for (const at::Tensor& p : params) {
    at::Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inverse);
    finite.push_back(at::isfinite(g).all());
  }
  // One host synchronisation per update, as GradScaler's found_inf check.
  return finite.empty() || at::stack(finite).all().item<bool>();
}

void LossScaler::update(bool finite) {
  if (!finite) {
    scale_ *= o_.backoff_factor;
    good_ = 0;
    ++skipped_;
    return;
  }
  if (++good_ >= o_.growth_interval) {
    scale_ *= o_.growth_factor;
    good_ = 0;
  }
}

at::Tensor LossScaler::state() const {
  return at::tensor({scale_, static_cast<double>(good_), static_cast<double>(skipped_)}, at::kDouble);
}

void LossScaler::load_state(const at::Tensor& state) {
  if (state.numel() != 3) throw UserError("a loss-scaler state must hold 3 numbers (scale, good steps, skipped)");
  const at::Tensor s = state.to(at::kCPU, at::kDouble).contiguous();
  scale_ = s[0].item<double>();
  good_ = static_cast<int64_t>(s[1].item<double>());
  skipped_ = static_cast<int64_t>(s[2].item<double>());
}

}  // namespace pipelab
