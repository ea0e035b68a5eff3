#pragma once
/// Batch normalisation that supports GPipe's deferred statistics (torchgpipe's
/// DeferredBatchNorm; docs/schemes.md, "gpipe", torchgpipe's quirks in docs/schemes.md, "Quirks").
///
/// - Plain mode: as torch.nn.BatchNorm, except that a recomputation pass (checkpointing)
///   does not update the running statistics a second time (docs/schemes.md, "Quirks").
/// - Deferred mode: each micro-batch is normalised with its own statistics; per-channel
///   moments accumulate over the micro-batches of a mini-batch (Chan's parallel merge, which
///   is stable where E[x^2]-E[x]^2 is not, docs/schemes.md, "Quirks") and commit() updates the running statistics
///   once, as whole-mini-batch batch norm would.
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace pipelab::nn {

struct BatchNormOptions {
  int64_t features = 0;
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = true;
};

class BatchNormImpl : public torch::nn::Cloneable<BatchNormImpl> {
 public:
  explicit BatchNormImpl(BatchNormOptions options);
  BatchNormImpl(int64_t features) : BatchNormImpl(BatchNormOptions{features}) {}
  void reset() override;
  /// Input [N, C, ...]: statistics per channel C over all other dimensions.
  torch::Tensor forward(const torch::Tensor& x);

  /// Switches deferred statistics on or off (clears any pending moments).
  void set_deferred(bool deferred);
  bool deferred() const { return deferred_; }
  /// Folds the moments accumulated since the last commit into the running statistics.
  /// `unbiased` uses N/(N-1) like nn.BatchNorm on the whole batch (the default); false
  /// reproduces torchgpipe's biased variance (fidelity option).
  void commit(bool unbiased = true);
  /// Elements accumulated per channel since the last commit.
  int64_t pending_count() const { return count_; }

  const BatchNormOptions& options() const { return options_; }
  torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  void accumulate(const torch::Tensor& x);

  BatchNormOptions options_;
  bool deferred_ = false;
  int64_t count_ = 0;
  torch::Tensor sum_mean_, sum_m2_;
};
TORCH_MODULE(BatchNorm);

/// Calls `fn` on every pipelab batch norm inside `module`.
void for_each_batch_norm(torch::nn::Module& module, const std::function<void(BatchNormImpl&)>& fn);

}  // namespace pipelab::nn
