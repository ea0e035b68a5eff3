#include "core/dist/group_all_reduce.h"

#include <ATen/ATen.h>

namespace pipelab::dist {

void GroupAllReduce::sum_gradients(int rank, const std::vector<at::Tensor>& params) {
  at::NoGradGuard no_grad;
  // One flat buffer per rank; a parameter without a gradient contributes zeros (x + 0 == x).
  std::vector<at::Tensor> flat;
  for (const at::Tensor& p : params) {
    const at::Tensor g = p.grad().defined() ? p.grad() : at::zeros_like(p);
    flat.push_back(g.detach().to(at::kCPU).reshape({-1}));
  }
  const std::vector<at::Tensor> all = group_.all_gather(at::cat(flat));
  // Every rank's gradients, shaped as this rank's parameters (the replicas' are alike).
  std::vector<std::vector<at::Tensor>> grads(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    int64_t offset = 0;
    for (const at::Tensor& p : params) {
      grads[r].push_back(all[r].narrow(0, offset, p.numel()).view(p.sizes()));
      offset += p.numel();
    }
  }
  const std::vector<at::Tensor> mine = finish_gradients(grads, plan_).at(static_cast<size_t>(rank));
  for (size_t i = 0; i < params.size(); ++i) {
    if (mine[i].defined()) params[i].mutable_grad() = mine[i].to(params[i].device()).clone();
  }
}

}  // namespace pipelab::dist
