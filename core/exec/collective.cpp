#include "core/exec/collective.h"

#include <ATen/ATen.h>

#include "core/util/error.h"

namespace pipelab {

void LocalAllReduce::add_rank(int rank, std::vector<at::Tensor> params) {
  std::lock_guard<std::mutex> lock(mutex_);
  params_.at(static_cast<size_t>(rank)) = std::move(params);
}

void LocalAllReduce::sum_gradients(int rank, const std::vector<at::Tensor>& params) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t round = rounds_.at(static_cast<size_t>(rank))++;
  auto it = sums_.find(round);
  if (it == sums_.end()) {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> sums;
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor sum;
      for (const auto& replica : params_) {
        PIPELAB_ASSERT(replica.size() == params.size(), "replicas have {} and {} parameters", replica.size(), params.size());
        const at::Tensor& g = replica[i].grad();
        if (!g.defined()) continue;
        sum = sum.defined() ? sum + g.to(params[i].device()) : g.to(params[i].device()).clone();
      }
      sums.push_back(sum);
    }
    it = sums_.emplace(round, std::make_pair(std::move(sums), static_cast<int>(params_.size()))).first;
  }
  const std::vector<at::Tensor>& sums = it->second.first;
  for (size_t i = 0; i < params.size(); ++i) {
    if (sums[i].defined()) params[i].mutable_grad() = sums[i].clone();
  }
  if (--it->second.second == 0) sums_.erase(it);
}

}  // namespace pipelab
