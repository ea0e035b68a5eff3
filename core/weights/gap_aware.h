#pragma once
/// Gap-Aware staleness mitigation (Barkai, Hakimi, Schuster, ICLR 2020) as FTPipe's code
/// computes it for SGD (`sgd_gap_aware.py`; F32, F33 in docs/schemes.md §3.15): before a stale
/// gradient is applied, each element is divided by P = 1 + Gap / C, where the Gap is how far the
/// weights the gradient was computed at are from the weights it is applied to, and C is
/// eta_max times the bias-corrected root of a running mean of the squared momentum buffer.
/// A weight-policy piece, like StashedWeights: a scheme with stale gradients calls it before
/// its update.
#include <vector>

#include "core/weights/weights.h"

namespace pipelab {

class GapAware {
 public:
  /// `big_gamma` is FTPipe's beta_GA (0.999), `eps` its 1e-8.
  explicit GapAware(double big_gamma = 0.999, double eps = 1e-8) : gamma_(big_gamma), eps_(eps) {}

  /// Before the update of `stage` that applies a gradient with recorded staleness
  /// `staleness` (F32: the steps taken between its forward and this update). With `stashed`
  /// (the weights its backward read) the Gap is |stashed - live| (`apply_on_theta`); without,
  /// lr |g| (`apply_from_grad`, which assumes a staleness of 1). Updates the running
  /// statistics at every step and rescales the gradients when staleness > 0.
  /// Throws UserError unless the stage's optimizer is SGD.
  void before_step(Stage& stage, int64_t staleness, const Weights* stashed);

  /// The last step's mean penalty P over all elements (1: none), for the stage metrics.
  double mean_penalty() const { return mean_penalty_; }

 private:
  double gamma_, eps_;
  std::vector<at::Tensor> a_;  ///< running mean of v^2 (or g^2 without momentum), per parameter
  int64_t count_ = 0;
  double lr_max_ = 0;
  double mean_penalty_ = 1;
};

}  // namespace pipelab
