#pragma once
/// Test metrics computed from a confusion matrix (DataSpec::metric).
#include <ATen/Tensor.h>

namespace pipelab {

/// The Matthews correlation of a [C, C] confusion matrix (row = target, column =
/// prediction), in [-1, 1]: Gorodkin's multi-class form (c s - sum_k p_k t_k) /
/// sqrt((s^2 - sum_k p_k^2)(s^2 - sum_k t_k^2)), with c the hits, s the examples, p_k and t_k
/// the predictions and targets of class k; for two classes the usual
/// (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)). 0 when a factor of the denominator
/// is 0 (every prediction, or every target, in one class), as scikit-learn's matthews_corrcoef.
double matthews_correlation(const at::Tensor& confusion);

}  // namespace pipelab
