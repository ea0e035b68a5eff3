#pragma once
/// Gap-Aware staleness mitigation (Barkai, Hakimi, Schuster, ICLR 2020) as FTPipe's code
/// computes it (Eliad et al., USENIX ATC 2021; docs/schemes.md, "Gap-Aware on pipedream"): before a
/// stale gradient is applied, each element is divided by P = 1 + Gap / C, where the Gap is how
/// far the weights the gradient was computed at are from the weights it is applied to, and C
/// estimates the size of one step:
/// - SGD: C = eta_max (sqrt(A / (1 - beta^c)) + eps), A a running mean of the squared
///   momentum buffer (of g^2 without momentum);
/// - Adam, AdamW: C = sqrt(S / (1 - beta2^t)) + eps, S a running mean (rate beta2) of
///   the squared step lr * m_hat / (sqrt(u_hat) + eps) taken after each update; with
///   `raw_adam_normaliser` C = sqrt(S) + eps, FTPipe's code (no bias correction, a quirk in docs/schemes.md, "Quirks").
/// Coupled L2 decay is divided by P with the gradient; AdamW's decoupled decay instead scales
/// the live weights by 1 - lambda lr (1 - P) / P before the step, so that it decays by
/// about lambda lr / P.
/// A weight-policy piece, like StashedWeights: a scheme with stale gradients calls it before
/// its update.
#include <vector>

#include "core/weights/weights.h"

namespace pipelab {

/// Which stages of a pipeline apply Gap-Aware: FTPipe's policies (`prepare_pipeline.py`).
enum class GapAwareStages { Off, AllExceptLast, AlmostLast, AllExceptLastTwo };
/// off | all_except_last (FTPipe's shipped configurations) | almost_last_partition | all_except_last_two.
const Choices<GapAwareStages>& gap_aware_stage_choices();
/// Whether stage r of D applies Gap-Aware under `policy`.
bool gap_aware_at(GapAwareStages policy, int r, int stages);

class GapAware {
 public:
  /// `big_gamma` is FTPipe's beta_GA (0.999) and `eps` its 1e-8 for SGD; Adam's form uses the
  /// optimizer's beta2 and eps, as FTPipe's code does.
  explicit GapAware(bool raw_adam_normaliser = false, double big_gamma = 0.999, double eps = 1e-8)
      : raw_adam_(raw_adam_normaliser), gamma_(big_gamma), eps_(eps) {}

  /// Before the update of `stage` that applies a gradient with recorded staleness
  /// `staleness` (the steps taken between its forward and this update, docs/schemes.md, "Gap-Aware on pipedream").
  /// With `stashed` (the weights its backward read, or its forward's) the Gap is |stashed - live|
  /// (`apply_on_theta`); without, lr |g| (`apply_from_grad`, SGD only, which assumes a
  /// staleness of 1). Updates the running statistics at every step and rescales the
  /// gradients when staleness > 0. Throws UserError for an optimizer other than SGD, Adam
  /// and AdamW, and for Adam/AdamW without `stashed`.
  void before_step(Stage& stage, int64_t staleness, const Weights* stashed);

  /// The last step's mean penalty P over all elements (1: none), for the stage metrics.
  double mean_penalty() const { return mean_penalty_; }

  /// The running statistics, for resumable checkpoints (a resumed run must penalise as the
  /// uninterrupted one would).
  c10::IValue state() const;
  void load_state(Stage& stage, const c10::IValue& state);

 private:
  /// S <- beta2 S + (1 - beta2) (lr d)^2 for the optimizer's latest step, once per step.
  void record_adam_step(Optimizer& optimizer, double beta2);

  bool raw_adam_;
  double gamma_, eps_;
  std::vector<at::Tensor> a_;  ///< SGD: running mean of v^2 (or g^2); Adam: S, of the squared steps
  int64_t count_ = 0;          ///< SGD: c, the statistics' updates; Adam: t, the steps recorded in S
  int64_t recorded_step_ = 0;  ///< Adam: the optimizer step S last recorded
  double lr_max_ = 0;
  double mean_penalty_ = 1;
};

}  // namespace pipelab
