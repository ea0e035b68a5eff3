#include "core/weights/gap_aware.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/util/error.h"

namespace pipelab {

const Choices<GapAwareStages>& gap_aware_stage_choices() {
  static const Choices<GapAwareStages> c{{"off", GapAwareStages::Off},
                                         {"all_except_last", GapAwareStages::AllExceptLast},
                                         {"almost_last_partition", GapAwareStages::AlmostLast},
                                         {"all_except_last_two", GapAwareStages::AllExceptLastTwo}};
  return c;
}

bool gap_aware_at(GapAwareStages policy, int r, int stages) {
  switch (policy) {
    case GapAwareStages::AllExceptLast: return r < stages - 1;
    case GapAwareStages::AlmostLast: return r == stages - 2;
    case GapAwareStages::AllExceptLastTwo: return r < stages - 2;
    default: return false;
  }
}

void GapAware::record_adam_step(Optimizer& optimizer, double beta2) {
  if (optimizer.steps() <= recorded_step_) return;
  // FTPipe's `*_record_step` optimizers keep this inside their step; reading the step's
  // direction back before the next one gives the same S. The optimizer's LR is still the one
  // the latest step used.
  const double lr = optimizer.lr();
  for (size_t i = 0; i < a_.size(); ++i) {
    const at::Tensor d = optimizer.direction(i);
    if (d.defined()) a_[i].mul_(beta2).addcmul_(d, d, (1 - beta2) * lr * lr);
  }
  recorded_step_ = optimizer.steps();
  ++count_;
}

void GapAware::before_step(Stage& stage, int64_t staleness, const Weights* stashed) {
  Optimizer& optimizer = stage.optimizer();
  const auto sgd = optimizer.sgd_settings();
  const auto adam = optimizer.adam_settings();
  if (!sgd && !adam) {
    throw UserError("gap_aware is implemented for SGD, Adam and AdamW (FTPipe's sgd, adam and adamw gap-aware). "
                    "Fix: use optimizer sgd, adam or adamw, or gap_aware: off");
  }
  if (adam && stashed == nullptr) {
    throw UserError("gap_aware with Adam or AdamW measures the Gap from stashed weights (FTPipe requires weight "
                    "stashing with it). Fix: turn weight stashing on (stash: true), or use optimizer sgd");
  }
  const std::vector<at::Tensor> params = stage.parameters();
  if (a_.empty()) {
    for (const at::Tensor& p : params) a_.push_back(at::zeros_like(p));
  }
  at::NoGradGuard no_grad;
  const double lr = stage.scheduled_lr();
  double correction = 1;
  double momentum = 0, coupled_decay = 0, decoupled_decay = 0;
  if (sgd) {
    momentum = sgd->momentum;
    coupled_decay = sgd->weight_decay;
    lr_max_ = std::max(lr_max_, lr);
    ++count_;
    correction = 1 - std::pow(gamma_, static_cast<double>(count_));
  } else {
    record_adam_step(optimizer, adam->beta2);
    (adam->decoupled ? decoupled_decay : coupled_decay) = adam->weight_decay;
    // FTPipe's code takes sqrt(S) as it is (a quirk, docs/schemes.md, "Quirks"); the default corrects S's
    // bias like u's.
    correction = raw_adam_ ? 1 : 1 - std::pow(adam->beta2, static_cast<double>(count_));
  }
  double penalty_sum = 0;
  int64_t elements = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (!p.grad().defined()) continue;
    if (sgd) {
      // FTPipe's running statistic reads the momentum buffer of the previous step (zero before
      // the first), or the current gradient without momentum.
      at::Tensor v = momentum > 0 ? optimizer.direction(i) : p.grad();
      if (!v.defined()) v = at::zeros_like(p);
      a_[i].mul_(gamma_).addcmul_(v, v, 1 - gamma_);
    }
    if (staleness <= 0 || count_ == 0) continue;
    const at::Tensor c = sgd ? (a_[i] / correction).sqrt_().add_(eps_).mul_(lr_max_)
                             : (a_[i] / correction).sqrt_().add_(adam->eps);
    const at::Tensor gap = stashed ? ((*stashed)[i] - p).abs_() : p.grad().abs() * lr;
    const at::Tensor penalty = gap.div_(c).add_(1);
    // The optimizer adds lambda W itself: feeding g/P + lambda W (1 - P)/P makes it apply (g + lambda W)/P.
    at::Tensor g = p.grad() / penalty;
    if (coupled_decay != 0) g.add_(p * coupled_decay * (1 - penalty) / penalty);
    p.mutable_grad() = g;
    // AdamW then scales W by (1 - lr lambda): with this first, W decays by about lr lambda / P.
    if (decoupled_decay != 0) p.data().mul_(1 - decoupled_decay * lr * (1 - penalty) / penalty);
    penalty_sum += penalty.sum().item<double>();
    elements += penalty.numel();
  }
  mean_penalty_ = elements > 0 ? penalty_sum / static_cast<double>(elements) : 1;
}

c10::IValue GapAware::state() const {
  c10::impl::GenericList statistics(c10::TensorType::get());
  for (const at::Tensor& t : a_) statistics.push_back(t.to(at::kCPU));
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  out.insert("statistics", statistics);
  out.insert("count", count_);
  out.insert("recorded_step", recorded_step_);
  out.insert("lr_max", lr_max_);
  return out;
}

void GapAware::load_state(Stage& stage, const c10::IValue& state) {
  if (!state.isGenericDict()) return;
  const c10::impl::GenericDict d = state.toGenericDict();
  const std::vector<at::Tensor> params = stage.parameters();
  a_.clear();
  for (const c10::IValue& t : d.at("statistics").toListRef()) a_.push_back(t.toTensor().to(params.at(a_.size()).options()));
  count_ = d.at("count").toInt();
  recorded_step_ = d.at("recorded_step").toInt();
  lr_max_ = d.at("lr_max").toDouble();
}

}  // namespace pipelab
