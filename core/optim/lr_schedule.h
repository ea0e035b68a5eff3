#pragma once
/// Learning-rate schedules: the LR at any optimizer step is base_lr x factor(epoch). Every schedule
/// also takes an optional linear warm-up and a granularity (the LR changes once per epoch, as in
/// SpecTrain's, docs/schemes.md, "1F1B", or at every step, as in torchgpipe's ResNet recipe).
#include "core/config/registry.h"

namespace pipelab {

/// Options every schedule shares; each schedule's options struct embeds one.
struct LrCommonOptions {
  enum class Granularity { Epoch, Step };
  Granularity granularity = Granularity::Epoch;
  double warmup_epochs = 0;
  double warmup_start_factor = 0;
  template <class V>
  void fields(V& v) {
    v.choice("granularity", granularity, Choices<Granularity>{{"epoch", Granularity::Epoch}, {"step", Granularity::Step}},
             "when the LR changes: once per epoch or at every step");
    v("warmup_epochs", warmup_epochs, "linear warm-up length in epochs (0 = none)", non_negative);
    v("warmup_start_factor", warmup_start_factor, "LR factor at the start of warm-up", in_range(0, 1));
  }
};

/// A registered LR schedule (`lr_schedule: {type: cosine, ...}`).
class LrSchedule : public Component {
 public:
  static constexpr const char* kKind = "lr schedule";
  /// The factor of the base LR at `epoch` (0-based; fractional within an epoch) of a run
  /// of `total_epochs`, including warm-up.
  double factor(double epoch, int total_epochs) const;
  /// The LR factor of optimizer step `step` (0-based) with `steps_per_epoch` steps per epoch.
  double factor_at_step(int64_t step, int64_t steps_per_epoch, int total_epochs) const;

 protected:
  /// The schedule's own shape, without warm-up.
  virtual double shape(double epoch, int total_epochs) const = 0;
  virtual const LrCommonOptions& common() const = 0;
};

}  // namespace pipelab
