#include "core/exec/process_world.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>

#include "core/processes/group_all_reduce.h"
#include "core/exec/executor.h"
#include "core/exec/trace_merge.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

/// Point-to-point tags of gather_weights (from here up: one per tensor). The distributed
/// executor's results use the two tags below it (core/exec/distributed.cpp).
constexpr int kWeightsTag = (1 << 30) + 16;
/// The tag of from_writer()'s decisions.
constexpr int kDecisionTag = (1 << 30) + 2;

/// Stands for a collective this rank has no member of: its stages never run here.
class ElsewhereAllReduce : public AllReduce {
 public:
  void sum_gradients(int rank, const std::vector<at::Tensor>&) override {
    PIPELAB_ASSERT(false, "member {} of an all-reduce that runs on other ranks ran here", rank);
  }
};

}  // namespace

int ProcessWorld::owner(int device, int devices, int world_size) {
  // The largest p whose first device is <= device.
  int p = world_size - 1;
  while (p > 0 && static_cast<int64_t>(p) * devices / world_size > device) --p;
  return p;
}

int ProcessWorld::stage_owner(int stage) const {
  return owner(placement_.at(static_cast<size_t>(stage)), devices_, options_.world_size);
}

dist::ProcessGroup& ProcessWorld::group() {
  PIPELAB_ASSERT(group_, "the process group is used before attach()");
  return *group_;
}

void ProcessWorld::attach(const std::vector<int>& placement) {
  if (placement_ == placement) return;
  PIPELAB_ASSERT(placement_.empty(), "attached to {} stages, then to {}", placement_.size(), placement.size());
  placement_ = placement;
  devices_ = placement.empty() ? 0 : *std::max_element(placement.begin(), placement.end()) + 1;
  if (options_.world_size > devices_) {
    throw UserError(fmt::format("{} processes for {} devices. Fix: use at most {} processes (executor.world_size).",
                                options_.world_size, devices_, devices_));
  }
  group_ = std::make_unique<dist::ProcessGroup>(options_);
}

void ProcessWorld::gather_weights(std::vector<StageSlot>& slots) {
  at::NoGradGuard no_grad;
  const int writer = stage_owner(stages() - 1);
  int tag = kWeightsTag;
  for (size_t r = 0; r < slots.size(); ++r) {
    const int from = stage_owner(static_cast<int>(r));
    torch::nn::Module& m = slots[r].stage->module();
    std::vector<at::Tensor> state = m.parameters();
    for (const at::Tensor& b : m.buffers()) state.push_back(b);
    for (at::Tensor& t : state) {
      if (from == writer) continue;
      if (options_.rank == from) {
        group().send(t.detach().to(at::kCPU).contiguous(), writer, tag);
      } else if (options_.rank == writer) {
        at::Tensor got = at::empty(t.sizes(), at::TensorOptions().dtype(t.scalar_type()));
        group().recv(got, from, tag);
        t.copy_(got);
      }
      ++tag;
    }
  }
  group().complete_sends();
}

ProcessWorld::~ProcessWorld() {
  // The decision posted for a step that never came: stopped, then dropped with the group.
  if (decision_posted_) {
    group_->abort_receives();
    decision_posted_.reset();
  }
}

bool ProcessWorld::from_writer(bool flag) {
  dist::ProcessGroup& g = group();
  const int writer = stage_owner(stages() - 1);
  if (options_.rank == writer) {
    for (int r = 0; r < options_.world_size; ++r) {
      if (r != writer) g.send(at::full({1}, flag ? 1 : 0, at::kLong), r, kDecisionTag);
    }
    return flag;
  }
  if (!decision_posted_) {
    decision_ = at::empty({1}, at::kLong);
    decision_posted_ = g.post_recv(decision_, writer, kDecisionTag);
  }
  g.wait_recv(*decision_posted_);
  const bool decided = decision_.item<int64_t>() != 0;
  // The next one, ahead (messages under one tag between two ranks arrive in order).
  decision_ = at::empty({1}, at::kLong);
  decision_posted_ = g.post_recv(decision_, writer, kDecisionTag);
  return decided;
}

bool ProcessWorld::any(bool flag) {
  for (const at::Tensor& t : group().all_gather(at::full({1}, flag ? 1 : 0, at::kLong))) {
    if (t.item<int64_t>() != 0) return true;
  }
  return false;
}

std::vector<std::string> ProcessWorld::gather_text(const std::string& key, const std::string& text) {
  return group().exchange(key, text);
}

std::vector<at::Tensor> ProcessWorld::gather_rows(const at::Tensor& rows) { return group().all_gather_rows(rows); }

void ProcessWorld::merge_stats(ExecStats& stats) {
  // Each process measured only its own stages and the messages it sent: the sums over
  // processes are the whole pipeline's figures.
  std::vector<double> mine;
  for (const std::vector<ActionTime>& times : stats.time) {
    for (const ActionTime& t : times) mine.insert(mine.end(), {static_cast<double>(t.count), t.seconds});
  }
  for (const auto* counts : {&stats.bytes_forward, &stats.bytes_backward, &stats.messages_forward,
                             &stats.messages_backward}) {
    for (const int64_t c : *counts) mine.push_back(static_cast<double>(c));
  }
  for (const std::vector<int64_t>& per_stage : stats.bytes) {
    for (const int64_t c : per_stage) mine.push_back(static_cast<double>(c));
  }
  const at::Tensor sum = at::stack(group().all_gather(at::tensor(mine, at::kDouble))).sum(0);
  const double* v = sum.data_ptr<double>();
  size_t k = 0;
  for (std::vector<ActionTime>& times : stats.time) {
    for (ActionTime& t : times) {
      t.count = static_cast<int64_t>(v[k++]);
      t.seconds = v[k++];
    }
  }
  for (auto* counts : {&stats.bytes_forward, &stats.bytes_backward, &stats.messages_forward,
                       &stats.messages_backward}) {
    for (int64_t& c : *counts) c = static_cast<int64_t>(v[k++]);
  }
  for (std::vector<int64_t>& per_stage : stats.bytes) {
    for (int64_t& c : per_stage) c = static_cast<int64_t>(v[k++]);
  }
  if (stats.trace) merge_trace(stats);
}

void ProcessWorld::merge_trace(ExecStats& stats) {
  // Each process's times count from its own ExecStats::origin on its own steady_clock, whose
  // origin is arbitrary per process: they cannot be compared as they are. Every process
  // leaves the barrier at nearly the same instant and reads its clock then (e_r); a time t
  // of process r is t + (e_writer - e_r) on the writer's clock, off by the barrier's exit
  // skew only. Nothing assumes a shared clock, so this holds across hosts too.
  group().barrier();
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - stats.origin).count();
  std::vector<int> mine;
  for (int s = 0; s < stages(); ++s) {
    if (stage_owner(s) == options_.rank) mine.push_back(s);
  }
  const std::vector<at::Tensor> all = gather_rows(trace_rows(stats, mine, now));
  if (!writes_results()) return;
  for (int p = 0; p < options_.world_size; ++p) {
    if (p != options_.rank) add_trace_rows(all.at(static_cast<size_t>(p)), now, stats);
  }
}

std::shared_ptr<AllReduce> ProcessWorld::all_reduce(GradientPlan plan) {
  const int plan_index = plans_++;
  if (plan.members.size() <= 1) return World::all_reduce(std::move(plan));
  // Member (p, r) is replica r's copy of pipeline stage p: stage r * S + p of the schedule.
  int replicas = 0;
  for (const GradientPlan::Member& m : plan.members) replicas = std::max(replicas, m.replica + 1);
  PIPELAB_ASSERT(stages() % replicas == 0, "{} stages are not {} replicas of one pipeline", stages(), replicas);
  const int per_replica = stages() / replicas;
  // The subgroup's ranks in the order their first member appears in the plan; a rank with
  // several members (several devices) brings them together (dist/group_all_reduce.h).
  std::vector<int> ranks, member_ranks, member_devices;
  for (const GradientPlan::Member& m : plan.members) {
    const int stage = m.replica * per_replica + m.stage;
    const int rank = stage_owner(stage);
    member_devices.push_back(placement_.at(static_cast<size_t>(stage)));
    auto it = std::find(ranks.begin(), ranks.end(), rank);
    if (it == ranks.end()) it = ranks.insert(ranks.end(), rank);
    member_ranks.push_back(static_cast<int>(it - ranks.begin()));
  }
  if (std::find(ranks.begin(), ranks.end(), options_.rank) == ranks.end()) return std::make_shared<ElsewhereAllReduce>();
  subgroups_.push_back(group().subgroup(ranks, fmt::format("allreduce{}", plan_index)));
  return std::make_shared<dist::GroupAllReduce>(*subgroups_.back(), std::move(plan), std::move(member_ranks),
                                                std::move(member_devices));
}

}  // namespace pipelab
