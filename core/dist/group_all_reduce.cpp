#include "core/dist/group_all_reduce.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

namespace pipelab::dist {

namespace {

/// `counts` (one per rank, perhaps of different lengths) gathered: every rank's list.
std::vector<std::vector<int64_t>> gather_counts(ProcessGroup& group, const std::vector<int64_t>& counts) {
  const std::vector<at::Tensor> lengths = group.all_gather(at::full({1}, static_cast<int64_t>(counts.size()), at::kLong));
  int64_t longest = 0;
  for (const at::Tensor& t : lengths) longest = std::max(longest, t.item<int64_t>());
  at::Tensor mine = at::zeros({longest}, at::kLong);
  for (size_t i = 0; i < counts.size(); ++i) mine[static_cast<int64_t>(i)] = counts[i];
  const std::vector<at::Tensor> all = group.all_gather(mine);
  std::vector<std::vector<int64_t>> out(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    for (int64_t i = 0; i < lengths[r].item<int64_t>(); ++i) out[r].push_back(all[r][i].item<int64_t>());
  }
  return out;
}

}  // namespace

void GroupAllReduce::sum_gradients(int rank, const std::vector<at::Tensor>& params) {
  at::NoGradGuard no_grad;
  // Members may be different stages (a model-wide clip or tie), so their parameters differ:
  // the sizes are gathered once, and every buffer is padded to the longest.
  if (numels_.empty()) {
    std::vector<int64_t> mine;
    for (const at::Tensor& p : params) mine.push_back(p.numel());
    numels_ = gather_counts(group_, mine);
    for (const auto& member : numels_) {
      longest_ = std::max<int64_t>(longest_, std::accumulate(member.begin(), member.end(), int64_t{0}));
    }
  }
  // One flat buffer per rank; a parameter without a gradient contributes zeros (x + 0 == x).
  std::vector<at::Tensor> flat;
  int64_t used = 0;
  for (const at::Tensor& p : params) {
    const at::Tensor g = p.grad().defined() ? p.grad() : at::zeros_like(p);
    flat.push_back(g.detach().to(at::kCPU).reshape({-1}));
    used += p.numel();
  }
  if (used < longest_) flat.push_back(at::zeros({longest_ - used}, flat.empty() ? at::kFloat : flat.front().scalar_type()));
  const std::vector<at::Tensor> all = group_.all_gather(at::cat(flat));
  // Every rank's gradients, flat per parameter (finish_gradients needs no shapes); this
  // rank's take its parameters' shapes at the end.
  std::vector<std::vector<at::Tensor>> grads(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    int64_t offset = 0;
    for (const int64_t n : numels_.at(r)) {
      grads[r].push_back(all[r].narrow(0, offset, n));
      offset += n;
    }
  }
  const std::vector<at::Tensor> mine = finish_gradients(grads, plan_).at(static_cast<size_t>(rank));
  for (size_t i = 0; i < params.size(); ++i) {
    if (mine[i].defined()) params[i].mutable_grad() = mine[i].view(params[i].sizes()).to(params[i].device()).clone();
  }
}

}  // namespace pipelab::dist
