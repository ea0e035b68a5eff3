#include "core/exec/collective.h"

#include <ATen/ATen.h>

#include "core/util/error.h"

namespace pipelab {

void LocalAllReduce::add_rank(int rank, std::vector<at::Tensor> params) {
  std::lock_guard<std::mutex> lock(mutex_);
  params_.at(static_cast<size_t>(rank)) = std::move(params);
}

void LocalAllReduce::produced(int rank) {
  const std::vector<at::Tensor>& params = params_.at(static_cast<size_t>(rank));
  if (params.empty()) return;
  device::Ready ready = device::record_ready(params.front().device());
  std::lock_guard<std::mutex> lock(mutex_);
  produced_.at(static_cast<size_t>(rank)) = std::move(ready);
}

void LocalAllReduce::sum_gradients(int rank, const std::vector<at::Tensor>& params) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t round = rounds_.at(static_cast<size_t>(rank))++;
  auto it = sums_.find(round);
  at::NoGradGuard no_grad;
  if (it == sums_.end()) {
    Round r;
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor sum;
      for (size_t k = 0; k < params_.size(); ++k) {
        const auto& replica = params_[k];
        PIPELAB_ASSERT(replica.size() == params.size(), "replicas have {} and {} parameters", replica.size(), params.size());
        const at::Tensor& g = replica[i].grad();
        if (!g.defined()) continue;
        // Replica k's gradient, on this device and stream, once its backward is done.
        const at::Tensor mine = device::transfer(g, produced_[k], params[i].device());
        sum = sum.defined() ? sum + mine : mine.clone();
      }
      r.sums.push_back(sum);
    }
    if (!params.empty()) r.ready = device::record_ready(params.front().device());
    r.ranks_left = static_cast<int>(params_.size());
    it = sums_.emplace(round, std::move(r)).first;
  }
  const Round& r = it->second;
  for (size_t i = 0; i < params.size(); ++i) {
    if (r.sums[i].defined()) params[i].mutable_grad() = device::transfer(r.sums[i], r.ready, params[i].device()).clone();
  }
  if (--it->second.ranks_left == 0) sums_.erase(it);
}

}  // namespace pipelab
