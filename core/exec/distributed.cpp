#include "core/exec/distributed.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>

#include <chrono>
#include <mutex>

#include "core/dist/group_all_reduce.h"
#include "core/dist/wire.h"
#include "core/exec/actions.h"
#include "core/exec/mailboxes.h"
#include "core/exec/stage_threads.h"

namespace pipelab {
namespace {

/// Local receivers through mailboxes, remote ones through the process group.
class GroupTransport : public Transport {
 public:
  GroupTransport(dist::ProcessGroup& group, Mailboxes& local, int stages)
      : group_(group), local_(local), stages_(stages) {}
  void send(int from, int to, ActionKind kind, int mb, Parcel p) override {
    if (owner(to) == group_.rank()) return local_.send(from, to, kind, mb, std::move(p));
    dist::send_message(group_, p.message, owner(to), static_cast<char>(kind), mb);
  }
  Parcel receive(int to, int from, ActionKind kind, int mb) override {
    if (owner(from) == group_.rank()) return local_.receive(to, from, kind, mb);
    return {dist::receive_message(group_, owner(from), static_cast<char>(kind), mb), nullptr};
  }
  void update_barrier(int) override { group_.barrier(); }

 private:
  int owner(int stage) const { return DistributedExecutor::owner(stage, stages_, group_.size()); }
  dist::ProcessGroup& group_;
  Mailboxes& local_;
  int stages_;
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

int DistributedExecutor::owner(int stage, int stages, int world_size) {
  // Rank p runs [p*D/N, (p+1)*D/N): the largest p whose first stage is <= stage.
  int p = world_size - 1;
  while (p > 0 && static_cast<int64_t>(p) * stages / world_size > stage) --p;
  return p;
}

void DistributedExecutor::attach(int stages) {
  if (stages_ == stages) return;
  PIPELAB_ASSERT(stages_ == 0, "attached to {} stages, then to {}", stages_, stages);
  stages_ = stages;
  if (options_.world_size > stages_) {
    throw UserError(fmt::format("{} processes for {} stages. Fix: use at most {} processes (executor.world_size).",
                                options_.world_size, stages_, stages_));
  }
  group_ = std::make_unique<dist::ProcessGroup>(dist::GroupOptions{
      options_.rank, options_.world_size, dist::Endpoint::parse(options_.master, "executor.master"),
      options_.timeout_s});
  int local = 0;
  for (int r = 0; r < stages_; ++r) local += owner(r, stages_, options_.world_size) == options_.rank;
  const int per_stage =
      options_.intra_op_threads > 0 ? options_.intra_op_threads : std::max(1, at::get_num_threads() / std::max(local, 1));
  threads_ = std::make_unique<StageThreads>(stages_, per_stage);
}

void DistributedExecutor::run(const Schedule& s, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) {
  const auto start = std::chrono::steady_clock::now();
  const int n = static_cast<int>(slots.size());
  if (stages_ == 0) attach(n);
  if (s.links.synchronized_updates && options_.world_size != stages_) {
    throw UserError("synchronized updates (data parallelism) need one process per replica. Fix: set "
                    "executor.world_size (pipelab launch --nproc) to the number of replicas.");
  }
  if (stats_.forward.size() != slots.size()) stats_.reset(n);
  begin_run(slots, s.micro_batches(), mode);
  const bool writer = writes_results(stages_);
  RelayFeed relay(feed, !writer);
  Mailboxes local(n);
  GroupTransport transport(*group_, local, stages_);
  threads_->run(
      [&](int r) {
        if (r >= n || owner(r, stages_, options_.world_size) != options_.rank || !slots[static_cast<size_t>(r)].stage) {
          return;
        }
        StageSlot& slot = slots[static_cast<size_t>(r)];
        device::StreamScope stream(slot.stage->device(), slot.stage->index());
        for (const Action& a : s.stage(r)) {
          if (local.cancelled()) throw Cancelled();
          run_action(s, r, a, slot, relay, mode, transport, stats_);
        }
      },
      [&] { local.cancel(); });
  relay_results(stages_, relay.kept(), feed);
  group_->complete_sends();
  end_run(slots, mode);
  stats_.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void DistributedExecutor::relay_results(int stages, std::vector<std::pair<int, MicroBatchResult>>& kept, Feed& feed) {
  const int writer = owner(stages - 1, stages, options_.world_size);
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
  const int writer = owner(stages_ - 1, stages_, options_.world_size);
  int tag = kResultsTag + 16;
  for (size_t r = 0; r < slots.size(); ++r) {
    const int from = owner(static_cast<int>(r), stages_, options_.world_size);
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
  for (const auto* times : {&stats_.forward, &stats_.head, &stats_.backward, &stats_.update}) {
    for (const ActionTime& t : *times) mine.insert(mine.end(), {static_cast<double>(t.count), t.seconds});
  }
  for (const auto* counts : {&stats_.bytes_forward, &stats_.bytes_backward, &stats_.messages_forward,
                             &stats_.messages_backward}) {
    for (const int64_t c : *counts) mine.push_back(static_cast<double>(c));
  }
  const at::Tensor sum = at::stack(group_->all_gather(at::tensor(mine, at::kDouble))).sum(0);
  const double* v = sum.data_ptr<double>();
  size_t k = 0;
  for (auto* times : {&stats_.forward, &stats_.head, &stats_.backward, &stats_.update}) {
    for (ActionTime& t : *times) {
      t.count = static_cast<int64_t>(v[k++]);
      t.seconds = v[k++];
    }
  }
  for (auto* counts : {&stats_.bytes_forward, &stats_.bytes_backward, &stats_.messages_forward,
                       &stats_.messages_backward}) {
    for (int64_t& c : *counts) c = static_cast<int64_t>(v[k++]);
  }
}

std::shared_ptr<AllReduce> DistributedExecutor::all_reduce(int) {
  PIPELAB_ASSERT(group_, "all_reduce() before attach()");
  return std::make_shared<dist::GroupAllReduce>(*group_);
}

PIPELAB_REGISTER(Executor, DistributedExecutor, "distributed",
                 "one process per stage (or group of stages) over c10d (Gloo); same numbers as sequential");

}  // namespace pipelab
