#include "core/dist/group_all_reduce.h"

#include <ATen/ATen.h>

namespace pipelab::dist {

void GroupAllReduce::sum_gradients(int, const std::vector<at::Tensor>& params) {
  at::NoGradGuard no_grad;
  // One flat buffer per rank; a parameter without a gradient contributes zeros (x + 0 == x).
  std::vector<at::Tensor> flat;
  for (const at::Tensor& p : params) {
    const at::Tensor g = p.grad().defined() ? p.grad() : at::zeros_like(p);
    flat.push_back(g.detach().to(at::kCPU).reshape({-1}));
  }
  const std::vector<at::Tensor> all = group_.all_gather(at::cat(flat));
  at::Tensor sum = all[0].clone();
  for (size_t r = 1; r < all.size(); ++r) sum = sum + all[r];
  int64_t offset = 0;
  for (const at::Tensor& p : params) {
    const int64_t n = p.numel();
    p.mutable_grad() = sum.narrow(0, offset, n).view(p.sizes()).to(p.device()).clone();
    offset += n;
  }
}

}  // namespace pipelab::dist
