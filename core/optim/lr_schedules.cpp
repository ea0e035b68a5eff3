/// The built-in LR schedules: constant, step, multistep, polynomial, cosine.
#include <algorithm>
#include <cmath>

#include "core/optim/lr_schedule.h"

namespace pipelab {

double LrSchedule::factor(double epoch, int total_epochs) const {
  double f = shape(epoch, total_epochs);
  const LrCommonOptions& c = common();
  if (c.warmup_epochs > 0 && epoch < c.warmup_epochs) {
    f *= c.warmup_start_factor + (1 - c.warmup_start_factor) * (epoch / c.warmup_epochs);
  }
  return f;
}

double LrSchedule::factor_at_step(int64_t step, int64_t steps_per_epoch, int total_epochs) const {
  const int64_t spe = std::max<int64_t>(steps_per_epoch, 1);
  const double epoch = common().granularity == LrCommonOptions::Granularity::Epoch
                           ? static_cast<double>(step / spe)
                           : static_cast<double>(step) / static_cast<double>(spe);
  return factor(epoch, total_epochs);
}

namespace {

/// Implements common() for a schedule whose options embed `LrCommonOptions common`.
template <class O>
class ScheduleBase : public Configured<LrSchedule, O> {
 public:
  using Configured<LrSchedule, O>::Configured;

 protected:
  const LrCommonOptions& common() const override { return this->options_.common; }
};

struct ConstantOptions {
  LrCommonOptions common;
  template <class V>
  void fields(V& v) { common.fields(v); }
};
class Constant : public ScheduleBase<ConstantOptions> {
 public:
  using ScheduleBase::ScheduleBase;
  double shape(double, int) const override { return 1; }
};

struct StepOptions {
  LrCommonOptions common;
  double step_size = 30;
  double gamma = 0.1;
  template <class V>
  void fields(V& v) {
    v("step_size", step_size, "epochs between decays", positive);
    v("gamma", gamma, "multiplicative decay", positive);
    common.fields(v);
  }
};
class StepDecay : public ScheduleBase<StepOptions> {
 public:
  using ScheduleBase::ScheduleBase;
  double shape(double epoch, int) const override {
    return std::pow(options_.gamma, std::floor(epoch / options_.step_size));
  }
};

struct MultiStepOptions {
  LrCommonOptions common;
  std::vector<double> milestones;
  double gamma = 0.1;
  template <class V>
  void fields(V& v) {
    v.required("milestones", milestones, "epochs at which the LR is multiplied by gamma", each(non_negative));
    v("gamma", gamma, "multiplicative decay", positive);
    common.fields(v);
  }
};
class MultiStep : public ScheduleBase<MultiStepOptions> {
 public:
  using ScheduleBase::ScheduleBase;
  double shape(double epoch, int) const override {
    const auto passed = std::count_if(options_.milestones.begin(), options_.milestones.end(),
                                      [&](double m) { return epoch >= m; });
    return std::pow(options_.gamma, static_cast<double>(passed));
  }
};

struct PolynomialOptions {
  LrCommonOptions common;
  double power = 1;
  double end_factor = 0;
  std::optional<int> total_epochs;
  template <class V>
  void fields(V& v) {
    v("power", power, "exponent p of (1 - epoch/total)^p (SpecTrain's schedule uses 2)", positive);
    v("end_factor", end_factor, "factor the LR decays to", in_range(0, 1));
    v("total_epochs", total_epochs, "decay horizon (default: run.epochs)");
    common.fields(v);
  }
};
class Polynomial : public ScheduleBase<PolynomialOptions> {
 public:
  using ScheduleBase::ScheduleBase;
  double shape(double epoch, int total_epochs) const override {
    const double total = options_.total_epochs ? *options_.total_epochs : total_epochs;
    const double left = std::clamp(1 - epoch / std::max(total, 1.0), 0.0, 1.0);
    return options_.end_factor + (1 - options_.end_factor) * std::pow(left, options_.power);
  }
};

struct CosineOptions {
  LrCommonOptions common;
  double min_factor = 0;
  std::optional<int> total_epochs;
  template <class V>
  void fields(V& v) {
    v("min_factor", min_factor, "factor at the end of the cosine", in_range(0, 1));
    v("total_epochs", total_epochs, "decay horizon (default: run.epochs)");
    common.fields(v);
  }
};
class Cosine : public ScheduleBase<CosineOptions> {
 public:
  using ScheduleBase::ScheduleBase;
  double shape(double epoch, int total_epochs) const override {
    const double total = options_.total_epochs ? *options_.total_epochs : total_epochs;
    const double x = std::clamp(epoch / std::max(total, 1.0), 0.0, 1.0);
    return options_.min_factor + (1 - options_.min_factor) * 0.5 * (1 + std::cos(M_PI * x));
  }
};

}  // namespace

PIPELAB_REGISTER(LrSchedule, Constant, "constant", "constant LR (after optional warm-up)");
PIPELAB_REGISTER(LrSchedule, StepDecay, "step", "LR x gamma every step_size epochs");
PIPELAB_REGISTER(LrSchedule, MultiStep, "multistep", "LR x gamma at each milestone epoch");
PIPELAB_REGISTER(LrSchedule, Polynomial, "polynomial", "LR x (1 - epoch/total)^power (SpecTrain: power 2)");
PIPELAB_REGISTER(LrSchedule, Cosine, "cosine", "cosine decay from the base LR to min_factor");

}  // namespace pipelab
