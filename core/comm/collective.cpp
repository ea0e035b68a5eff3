#include "core/comm/collective.h"

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
    // Every member's gradients, on this device and stream, once its backward is done.
    const c10::Device here = params.empty() ? c10::Device(c10::kCPU) : params.front().device();
    std::vector<std::vector<at::Tensor>> grads(params_.size());
    for (size_t k = 0; k < params_.size(); ++k) {
      for (const at::Tensor& p : params_[k]) {
        const at::Tensor& g = p.grad();
        grads[k].push_back(g.defined() ? device::transfer(g, produced_[k], here) : at::Tensor());
      }
    }
    Round r;
    r.finished = finish_gradients(grads, plan_);
    if (!params.empty()) r.ready = device::record_ready(here);
    r.ranks_left = static_cast<int>(params_.size());
    it = sums_.emplace(round, std::move(r)).first;
  }
  const std::vector<at::Tensor>& mine = it->second.finished.at(static_cast<size_t>(rank));
  PIPELAB_ASSERT(mine.size() == params.size(), "member {} has {} parameters, its finished gradients {}", rank,
                 params.size(), mine.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!mine[i].defined()) continue;
    const at::Tensor finished = device::transfer(mine[i], it->second.ready, params[i].device());
    at::Tensor& grad = params[i].mutable_grad();
    // Into the gradient in place, as a c10d all-reduce does: a new copy would hold the
    // member's gradient twice while it is made.
    if (grad.defined() && grad.sizes() == finished.sizes() && grad.dtype() == finished.dtype()) {
      grad.copy_(finished);
    } else {
      grad = finished.clone();
    }
  }
  if (--it->second.ranks_left == 0) sums_.erase(it);
}

}  // namespace pipelab
