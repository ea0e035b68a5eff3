#include "core/processes/group_all_reduce.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

#include "core/processes/value_rows.h"
#include "core/util/error.h"

namespace pipelab::dist {

namespace {

/// A member's gradients, flat per parameter, on the CPU; a parameter without a gradient
/// contributes zeros (x + 0 == x).
std::vector<at::Tensor> flat_gradients(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& p : params) {
    const at::Tensor g = p.grad().defined() ? p.grad() : at::zeros_like(p);
    flat.push_back(g.detach().to(at::kCPU).reshape({-1}));
  }
  return flat;
}

}  // namespace

GroupAllReduce::GroupAllReduce(ProcessGroup& group, GradientPlan plan, std::vector<int> member_ranks,
                               std::vector<int> member_devices)
    : group_(group), plan_(std::move(plan)), member_ranks_(std::move(member_ranks)),
      member_devices_(std::move(member_devices)) {
  PIPELAB_ASSERT(member_ranks_.size() == plan_.members.size() && member_devices_.size() == plan_.members.size(),
                 "{} ranks and {} devices for {} members", member_ranks_.size(), member_devices_.size(),
                 plan_.members.size());
  std::set<int> devices;
  for (size_t m = 0; m < member_ranks_.size(); ++m) {
    if (member_ranks_[m] != group_.rank()) continue;
    local_.push_back(static_cast<int>(m));
    devices.insert(member_devices_[m]);
  }
  local_devices_ = static_cast<int>(devices.size());
}

void GroupAllReduce::add_rank(int member, std::vector<at::Tensor> params) {
  std::lock_guard<std::mutex> lock(mutex_);
  params_[member] = std::move(params);
}

void GroupAllReduce::sum_gradients(int member, const std::vector<at::Tensor>& params) {
  at::NoGradGuard no_grad;
  const int device = member_devices_.at(static_cast<size_t>(member));
  std::unique_lock<std::mutex> lock(mutex_);
  const int64_t index = next_round_[member]++;
  Round& round = rounds_[index];
  if (!round.devices.insert(device).second) {
    // This device arrived at an earlier member of the round, which waited for the result.
    PIPELAB_ASSERT(round.done, "member {} finds round {} of its device unfinished", member, index);
  } else {
    // The device arrives: its members' gradients, this one's and those it runs later.
    for (const int m : local_) {
      if (member_devices_[static_cast<size_t>(m)] != device) continue;
      round.flat[m] = flat_gradients(m == member ? params : params_.at(m));
    }
  }
  if (!round.done && static_cast<int>(round.devices.size()) == local_devices_) {
    // The last of this rank's devices to arrive speaks for all of them; the others wait.
    std::map<int, std::vector<at::Tensor>> mine = std::move(round.flat);
    lock.unlock();
    std::vector<std::vector<at::Tensor>> finished = exchange(mine);
    lock.lock();
    round.finished = std::move(finished);
    round.done = true;
    done_.notify_all();
  } else if (!round.done) {
    done_.wait(lock, [&] { return round.done; });
  }
  const std::vector<at::Tensor> result = round.finished.at(static_cast<size_t>(member));
  if (++round.taken == static_cast<int>(local_.size())) rounds_.erase(index);
  lock.unlock();
  for (size_t i = 0; i < params.size(); ++i) {
    if (result[i].defined()) params[i].mutable_grad() = result[i].view(params[i].sizes()).to(params[i].device()).clone();
  }
}

std::vector<std::vector<at::Tensor>> GroupAllReduce::exchange(const std::map<int, std::vector<at::Tensor>>& flat) {
  // Members may be different stages (a model-wide clip or tie), so their parameters differ:
  // the sizes are gathered once (per rank: each of its members' parameter count, then their
  // sizes), and every rank's buffer is padded to the longest.
  if (numels_.empty()) {
    std::vector<int64_t> sizes;
    for (const auto& [m, grads] : flat) {
      sizes.push_back(static_cast<int64_t>(grads.size()));
      for (const at::Tensor& g : grads) sizes.push_back(g.numel());
    }
    const std::vector<std::vector<int64_t>> per_rank = row_values(group_.all_gather_rows(value_rows(sizes)));
    numels_.resize(plan_.members.size());
    for (size_t r = 0; r < per_rank.size(); ++r) {
      size_t k = 0;
      int64_t total = 0;
      for (size_t m = 0; m < member_ranks_.size(); ++m) {
        if (member_ranks_[m] != static_cast<int>(r)) continue;
        const int64_t count = per_rank[r].at(k++);
        for (int64_t i = 0; i < count; ++i) numels_[m].push_back(per_rank[r].at(k++));
        total += std::accumulate(numels_[m].begin(), numels_[m].end(), int64_t{0});
      }
      longest_ = std::max(longest_, total);
    }
  }
  std::vector<at::Tensor> buffer;
  int64_t used = 0;
  for (const auto& [m, grads] : flat) {
    for (const at::Tensor& g : grads) {
      buffer.push_back(g);
      used += g.numel();
    }
  }
  const at::ScalarType dtype = buffer.empty() ? at::kFloat : buffer.front().scalar_type();
  if (used < longest_ || buffer.empty()) buffer.push_back(at::zeros({longest_ - used}, dtype));
  const std::vector<at::Tensor> all = group_.all_gather(at::cat(buffer));
  // Every member's gradients, flat per parameter (finish_gradients needs no shapes), read
  // from its rank's buffer in plan order; each member takes its parameters' shapes later.
  std::vector<std::vector<at::Tensor>> grads(plan_.members.size());
  std::vector<int64_t> offset(all.size(), 0);
  for (size_t m = 0; m < member_ranks_.size(); ++m) {
    const size_t r = static_cast<size_t>(member_ranks_[m]);
    for (const int64_t n : numels_[m]) {
      grads[m].push_back(all.at(r).narrow(0, offset[r], n));
      offset[r] += n;
    }
  }
  return finish_gradients(grads, plan_);
}

}  // namespace pipelab::dist
