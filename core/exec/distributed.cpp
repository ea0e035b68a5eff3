#include "core/exec/distributed.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>

#include "core/dist/group_all_reduce.h"
#include "core/dist/wire.h"
#include "core/exec/actions.h"
#include "core/exec/mailboxes.h"
#include "core/exec/remote_receives.h"
#include "core/exec/stage_threads.h"
#include "core/exec/trace_merge.h"
#include "core/schedule/dataflow.h"
#include "core/schedule/lower.h"

namespace pipelab {
namespace {

/// Local receivers through mailboxes, remote ones through the process group; what comes from
/// another process was received ahead into the mailboxes (exec/remote_receives.h).
class GroupTransport : public Transport {
 public:
  GroupTransport(dist::ProcessGroup& group, Mailboxes& local, std::function<int(int)> owner)
      : group_(group), local_(local), owner_(std::move(owner)) {}
  void send(int from, int to, char kind, int mb, Parcel p) override {
    if (owner_(to) == group_.rank()) return local_.send(from, to, kind, mb, std::move(p));
    dist::send_message(group_, p.message, owner_(to), kind, mb, to);
  }
  Parcel receive(int to, int from, char kind, int mb) override { return local_.receive(to, from, kind, mb); }
  // One device per process (run() checks that a schedule with collectives has it so): the
  // members of a collective meet in its subgroup's all-gather (all_reduce()), so there is
  // nothing to wait for here.
  void collective_barrier(int, int) override {}

 private:
  dist::ProcessGroup& group_;
  Mailboxes& local_;
  std::function<int(int)> owner_;  ///< stage -> rank
};

/// Passes everything through, except that results on a rank that does not report them
/// are kept, to be sent to the rank that does.
class RelayFeed : public Feed {
 public:
  RelayFeed(Feed& inner, bool keep) : inner_(inner), keep_(keep) {}
  at::Tensor input(int mb) override { return inner_.input(mb); }
  at::Tensor target(int mb) override { return inner_.target(mb); }
  double loss_scale(int mb) override { return inner_.loss_scale(mb); }
  void on_result(int mb, const MicroBatchResult& r) override {
    if (!keep_) return inner_.on_result(mb, r);
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.emplace_back(mb, r);
  }
  std::vector<std::pair<int, MicroBatchResult>>& kept() { return kept_; }

 private:
  Feed& inner_;
  bool keep_;
  std::mutex mutex_;
  std::vector<std::pair<int, MicroBatchResult>> kept_;
};

constexpr int kResultsTag = (1 << 30);

}  // namespace

DistributedExecutor::DistributedExecutor(DistributedOptions options) : Configured(std::move(options)) {
  if (options_.rank >= options_.world_size) {
    throw UserError(fmt::format("executor.rank {} is not below executor.world_size {}. Fix: ranks are 0..{}.",
                                options_.rank, options_.world_size, options_.world_size - 1));
  }
  dist::Endpoint::parse(options_.master, "executor.master");
}

DistributedExecutor::~DistributedExecutor() = default;

int DistributedExecutor::owner(int device, int devices, int world_size) {
  // Rank p runs [p*D/N, (p+1)*D/N): the largest p whose first device is <= device.
  int p = world_size - 1;
  while (p > 0 && static_cast<int64_t>(p) * devices / world_size > device) --p;
  return p;
}

int DistributedExecutor::stage_owner(int stage) const {
  return owner(placement_.at(static_cast<size_t>(stage)), devices_, options_.world_size);
}

void DistributedExecutor::attach(const std::vector<int>& placement) {
  if (placement_ == placement) return;
  PIPELAB_ASSERT(placement_.empty(), "attached to {} stages, then to {}", placement_.size(), placement.size());
  placement_ = placement;
  devices_ = placement.empty() ? 0 : *std::max_element(placement.begin(), placement.end()) + 1;
  if (options_.world_size > devices_) {
    throw UserError(fmt::format("{} processes for {} devices. Fix: use at most {} processes (executor.world_size).",
                                options_.world_size, devices_, devices_));
  }
  group_ = std::make_unique<dist::ProcessGroup>(dist::GroupOptions{
      options_.rank, options_.world_size, dist::Endpoint::parse(options_.master, "executor.master"),
      options_.timeout_s});
  int local = 0;
  for (int d = 0; d < devices_; ++d) local += owner(d, devices_, options_.world_size) == options_.rank;
  const int per_device =
      options_.intra_op_threads > 0 ? options_.intra_op_threads : std::max(1, at::get_num_threads() / std::max(local, 1));
  threads_ = std::make_unique<StageThreads>(devices_, per_device);
}

void DistributedExecutor::run(const Schedule& schedule, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) {
  const auto start = std::chrono::steady_clock::now();
  const Schedule s = with_communication(schedule);
  const int n = static_cast<int>(slots.size());
  if (placement_.empty()) {
    std::vector<int> placement = s.placement();
    for (int& d : placement) d = std::max(d, 0);
    attach(placement);
  }
  PIPELAB_ASSERT(s.devices() <= devices_, "the schedule has {} devices, the processes were set up for {}", s.devices(),
                 devices_);
  if (!all_reduce_positions(s).front().empty() && options_.world_size != devices_) {
    throw UserError("a schedule with ALLREDUCE (data parallelism) needs one process per device. Fix: set "
                    "executor.world_size (pipelab launch --nproc) to the number of replicas.");
  }
  if (stats_.stages() != slots.size()) stats_.reset(n);
  begin_run(slots, s, mode);
  const bool writer = writes_results();
  RelayFeed relay(feed, !writer);
  Mailboxes local(n);
  GroupTransport transport(*group_, local, [this](int stage) { return stage_owner(stage); });
  std::vector<DeviceWork> work;
  for (int d = 0; d < s.devices(); ++d) work.emplace_back(s, d);
  const auto local_device = [&](int d) { return owner(d, devices_, options_.world_size) == options_.rank; };
  RemoteReceives remote(s, *group_, local, local_device, [this](int stage) { return stage_owner(stage); });
  try {
    threads_->run(
        [&](int d) {
          if (d >= s.devices()) return;
          const auto& actions = s.device(d);
          if (actions.empty() || !local_device(d)) return;
          device::StreamScope stream(slots.at(static_cast<size_t>(actions.front().stage)).stage->device(), d);
          MemoryMeter::Install metered(stats_.memory);
          for (size_t i = 0; i < actions.size(); ++i) {
            if (local.cancelled()) throw Cancelled();
            run_action(i, work[static_cast<size_t>(d)], slots.at(static_cast<size_t>(actions[i].stage)), relay, mode,
                       transport, stats_);
          }
        },
        [&] {
          local.cancel();
          remote.stop();
        });
  } catch (const Cancelled&) {
    remote.finish();  // a lost peer is why, if a receiver met it
    throw;
  }
  remote.finish();
  relay_results(relay.kept(), feed);
  group_->complete_sends();
  end_run(slots, mode);
  stats_.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void DistributedExecutor::relay_results(std::vector<std::pair<int, MicroBatchResult>>& kept, Feed& feed) {
  const int writer = stage_owner(stages() - 1);
  if (options_.rank != writer) {
    // Rows of (micro-batch, loss, hits, count); the loss keeps its bits through double.
    at::Tensor rows = at::zeros({static_cast<int64_t>(kept.size()), 4}, at::kDouble);
    for (size_t i = 0; i < kept.size(); ++i) {
      const MicroBatchResult& r = kept[i].second;
      rows[static_cast<int64_t>(i)][0] = kept[i].first;
      rows[static_cast<int64_t>(i)][1] = r.loss.item<double>();
      rows[static_cast<int64_t>(i)][2] = r.correct.item<double>();
      rows[static_cast<int64_t>(i)][3] = static_cast<double>(r.count);
    }
    group_->send(at::full({1}, static_cast<int64_t>(kept.size()), at::kLong), writer, kResultsTag);
    if (!kept.empty()) group_->send(rows, writer, kResultsTag + 1);
    return;
  }
  for (int p = 0; p < options_.world_size; ++p) {
    if (p == writer) continue;
    at::Tensor count = at::empty({1}, at::kLong);
    group_->recv(count, p, kResultsTag);
    if (count.item<int64_t>() == 0) continue;
    at::Tensor rows = at::empty({count.item<int64_t>(), 4}, at::kDouble);
    group_->recv(rows, p, kResultsTag + 1);
    auto a = rows.accessor<double, 2>();
    for (int64_t i = 0; i < rows.size(0); ++i) {
      MicroBatchResult r;
      r.loss = at::scalar_tensor(a[i][1], at::kDouble);
      r.correct = at::scalar_tensor(static_cast<int64_t>(a[i][2]), at::kLong);
      r.count = static_cast<int64_t>(a[i][3]);
      feed.on_result(static_cast<int>(a[i][0]), r);
    }
  }
}

void DistributedExecutor::gather_weights(std::vector<StageSlot>& slots) {
  at::NoGradGuard no_grad;
  const int writer = stage_owner(stages() - 1);
  int tag = kResultsTag + 16;
  for (size_t r = 0; r < slots.size(); ++r) {
    const int from = stage_owner(static_cast<int>(r));
    torch::nn::Module& m = slots[r].stage->module();
    std::vector<at::Tensor> state = m.parameters();
    for (const at::Tensor& b : m.buffers()) state.push_back(b);
    for (at::Tensor& t : state) {
      if (from == writer) continue;
      if (options_.rank == from) {
        group_->send(t.detach().to(at::kCPU).contiguous(), writer, tag);
      } else if (options_.rank == writer) {
        at::Tensor got = at::empty(t.sizes(), at::TensorOptions().dtype(t.scalar_type()));
        group_->recv(got, from, tag);
        t.copy_(got);
      }
      ++tag;
    }
  }
  group_->complete_sends();
}

bool DistributedExecutor::any(bool flag) {
  const std::vector<at::Tensor> all = group_->all_gather(at::full({1}, flag ? 1 : 0, at::kLong));
  for (const at::Tensor& t : all) {
    if (t.item<int64_t>() != 0) return true;
  }
  return false;
}

std::vector<std::string> DistributedExecutor::gather_text(const std::string& key, const std::string& text) {
  PIPELAB_ASSERT(group_, "gather_text() before attach()");
  return group_->exchange(key, text);
}

void DistributedExecutor::merge_stats() {
  PIPELAB_ASSERT(group_, "merge_stats() before attach()");
  // Each process measured only its own stages and the messages it sent: the sums over
  // processes are the whole pipeline's figures.
  std::vector<double> mine;
  for (const std::vector<ActionTime>& times : stats_.time) {
    for (const ActionTime& t : times) mine.insert(mine.end(), {static_cast<double>(t.count), t.seconds});
  }
  for (const auto* counts : {&stats_.bytes_forward, &stats_.bytes_backward, &stats_.messages_forward,
                             &stats_.messages_backward}) {
    for (const int64_t c : *counts) mine.push_back(static_cast<double>(c));
  }
  for (const std::vector<int64_t>& per_stage : stats_.bytes) {
    for (const int64_t c : per_stage) mine.push_back(static_cast<double>(c));
  }
  const at::Tensor sum = at::stack(group_->all_gather(at::tensor(mine, at::kDouble))).sum(0);
  const double* v = sum.data_ptr<double>();
  size_t k = 0;
  for (std::vector<ActionTime>& times : stats_.time) {
    for (ActionTime& t : times) {
      t.count = static_cast<int64_t>(v[k++]);
      t.seconds = v[k++];
    }
  }
  for (auto* counts : {&stats_.bytes_forward, &stats_.bytes_backward, &stats_.messages_forward,
                       &stats_.messages_backward}) {
    for (int64_t& c : *counts) c = static_cast<int64_t>(v[k++]);
  }
  for (std::vector<int64_t>& per_stage : stats_.bytes) {
    for (int64_t& c : per_stage) c = static_cast<int64_t>(v[k++]);
  }
  if (stats_.trace) merge_trace();
}

void DistributedExecutor::merge_trace() {
  // Each process's times count from its own ExecStats::origin on its own steady_clock, whose
  // origin is arbitrary per process: they cannot be compared as they are. Every process
  // leaves the barrier at nearly the same instant and reads its clock then (e_r); a time t
  // of process r is t + (e_writer - e_r) on the writer's clock, off by the barrier's exit
  // skew only. Nothing assumes a shared clock, so this holds across hosts too.
  group_->barrier();
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - stats_.origin).count();
  std::vector<int> mine;
  for (int s = 0; s < stages(); ++s) {
    if (stage_owner(s) == options_.rank) mine.push_back(s);
  }
  // The store keeps every key: each merge needs its own.
  const std::vector<std::string> all =
      group_->exchange(fmt::format("trace{}", trace_merges_++), encode_trace(stats_, mine, now));
  if (!writes_results()) return;
  for (int p = 0; p < options_.world_size; ++p) {
    if (p != options_.rank) decode_trace(all.at(static_cast<size_t>(p)), now, stats_);
  }
}

namespace {

/// Stands for a collective this rank has no member of: its stages never run here.
class ElsewhereAllReduce : public AllReduce {
 public:
  void sum_gradients(int rank, const std::vector<at::Tensor>&) override {
    PIPELAB_ASSERT(false, "member {} of an all-reduce that runs on other ranks ran here", rank);
  }
};

}  // namespace

std::shared_ptr<AllReduce> DistributedExecutor::all_reduce(GradientPlan plan) {
  PIPELAB_ASSERT(group_, "all_reduce() before attach()");
  const int plan_index = plans_++;
  if (plan.members.size() <= 1) return Executor::all_reduce(std::move(plan));
  // Member (p, r) is replica r's copy of pipeline stage p: stage r * S + p of the schedule.
  int replicas = 0;
  for (const GradientPlan::Member& m : plan.members) replicas = std::max(replicas, m.replica + 1);
  PIPELAB_ASSERT(stages() % replicas == 0, "{} stages are not {} replicas of one pipeline", stages(), replicas);
  const int per_replica = stages() / replicas;
  std::vector<int> ranks;
  for (const GradientPlan::Member& m : plan.members) {
    const int rank = stage_owner(m.replica * per_replica + m.stage);
    if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) {
      throw UserError(fmt::format("rank {} holds two stages that meet in one all-reduce (a model-wide clip or tie "
                                  "with several stages per process). Fix: run one stage per process, set "
                                  "optimizer.clip_scope: per_stage (and no tie across stages), or use a "
                                  "single-process executor",
                                  rank));
    }
    ranks.push_back(rank);
  }
  if (std::find(ranks.begin(), ranks.end(), options_.rank) == ranks.end()) return std::make_shared<ElsewhereAllReduce>();
  // Members in plan order, so subgroup rank m is member m (finish_gradients' order).
  subgroups_.push_back(group_->subgroup(ranks, fmt::format("allreduce{}", plan_index)));
  return std::make_shared<dist::GroupAllReduce>(*subgroups_.back(), std::move(plan));
}

PIPELAB_REGISTER(Executor, DistributedExecutor, "distributed",
                 "one process per device (or group of devices) over c10d (Gloo); same numbers as sequential");

}  // namespace pipelab
