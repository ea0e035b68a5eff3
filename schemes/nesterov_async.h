#pragma once
/// The Nesterov asynchronous scheme's adaptive momentum (AsyncPP's --adaptive_momentum,
/// docs/schemes.md, "nesterov_async"), as a plain function so that tests can hold it to its oracle (docs/schemes.md,
/// "Numbered oracles").
namespace pipelab::nesterov_async {

/// Stage r of D: beta1 + w_r (0.99 - beta1) / D, with w_r = D - 1 - r the stage's delay.
inline double adaptive_beta1(double beta1, int r, int stages) {
  return beta1 + static_cast<double>(stages - 1 - r) * (0.99 - beta1) / static_cast<double>(stages);
}

}  // namespace pipelab::nesterov_async
