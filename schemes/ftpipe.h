#pragma once
/// FTPipe's weight predictors as pure functions of one parameter and its optimizer state, so that
/// tests hold them to their oracles in docs/schemes.md, "Numbered oracles" (S. Eliad, I. Hakimi, A. De Jagger,
/// M. Silberstein, A. Schuster, "Fine-tuning giant neural networks on commodity hardware with
/// automatic pipeline model parallelism", USENIX ATC 2021; docs/schemes.md, "ftpipe", the staleness
/// in docs/schemes.md, "Gap-Aware on pipedream"). Each predicts the weights after n = lrs.size() future steps whose
/// gradients are zero, except `phi`, the gradient accumulated so far (undefined: zero), on the first one; lrs[k-1] is
/// the LR of the k-th step.
#include <ATen/Tensor.h>

#include <algorithm>
#include <vector>

#include "core/optim/optimizer.h"

namespace pipelab::ftpipe {

/// The expected staleness (docs/schemes.md, "Gap-Aware on pipedream") of micro-batch `mb` (counted from the last flush)
/// at a stage with `warmup` = w_r warm-up forwards: the updates its stage makes between its forward
/// and its own update, min(mb, w_r).
inline int64_t expected_staleness(int64_t mb, int warmup) { return std::min<int64_t>(mb, warmup); }

/// msnag's coefficient (docs/schemes.md, "ftpipe") c_n = sum_{k=1..n} mu^k = (mu - mu^{n+1}) / (1 - mu).
double msnag_coefficient(double momentum, int n);

/// "msnag" (lambda = 0, no phi: W - lr c_n v) and "aggmsnag" (docs/schemes.md, "ftpipe"): n torch-SGD steps
/// from (w, v) with e_k = phi [k = 1] + lambda w_hat: v_hat <- mu v_hat + (1 - tau) e_k, then
/// w_hat <- w_hat - lr_k (e_k + mu v_hat with Nesterov, else v_hat); without momentum
/// w_hat <- w_hat - lr_k e_k. `v` is the momentum buffer (undefined: zero, as FTPipe's
/// predictor creates it).
at::Tensor predict_sgd(const at::Tensor& w, const at::Tensor& v, const at::Tensor& phi,
                       const Optimizer::SgdSettings& sgd, const std::vector<double>& lrs);

/// `nag_with_predictor` (docs/schemes.md, "ftpipe") at staleness 0: one look-ahead
/// W - lr mu v - lr phi, without the decay term.
at::Tensor predict_nag(const at::Tensor& w, const at::Tensor& v, const at::Tensor& phi, double momentum, double lr);

/// The Adam and AdamW predictors (docs/schemes.md, "ftpipe") after t steps, u held fixed:
///   m_hat <- beta1 m_hat + (1 - beta1) e_k,  e_k = phi [k = 1] + lambda w_hat (Adam's L2 only);
///   w_hat <- w_hat (1 - lr_k lambda) (AdamW only);
///   w_hat <- w_hat - lr_k m_hat / (1 - beta1^{t+k}) / (sqrt(u) / sqrt(1 - beta2^{t+k}) + eps).
/// Without e (no L2, no phi) m_hat is beta1^k m, the Adam formula as written.
at::Tensor predict_adam(const at::Tensor& w, const at::Tensor& m, const at::Tensor& u, const at::Tensor& phi, int64_t t,
                        const Optimizer::AdamSettings& adam, const std::vector<double>& lrs);

}  // namespace pipelab::ftpipe
