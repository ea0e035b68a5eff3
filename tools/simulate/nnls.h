#pragma once
/// Non-negative least squares: the x >= 0 that minimises |A x - b|, by Lawson and Hanson's
/// active-set method ("Solving Least Squares Problems", 1974, chapter 23). Written here
/// because neither LibTorch nor the Eigen Debian ships has it (Eigen's NNLS module is newer);
/// each subproblem is LibTorch's least squares. Small problems (`pipelab calibrate` fits a
/// handful of rates); tests/tools/nnls_test.cpp checks it against every active set.
#include <vector>

namespace pipelab::sim {

/// `a` is row-major, rows x cols (cols = a.size() / b.size()). Returns cols values >= 0.
std::vector<double> nnls(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace pipelab::sim
