#include "core/exec/distributed.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <mutex>

#include "core/processes/wire.h"
#include "core/exec/actions.h"
#include "core/exec/mailboxes.h"
#include "core/exec/remote_receives.h"
#include "core/exec/stage_threads.h"
#include "core/schedule/lower.h"

namespace pipelab {
namespace {

/// Local receivers through mailboxes, remote ones through the process group: a device's
/// thread takes what comes from another process from the receives posted ahead for it
/// (exec/remote_receives.h).
class GroupTransport : public Transport {
 public:
  GroupTransport(dist::ProcessGroup& group, Mailboxes& local, RemoteReceives& remote, std::function<int(int)> owner,
                 std::vector<int> placement, const DeviceChannels& channels, const HostLinks& links,
                 dist::WireSizes& sizes)
      : group_(group), local_(local), remote_(remote), owner_(std::move(owner)), placement_(std::move(placement)),
        channels_(channels), links_(links), sizes_(sizes) {}
  void send(int from, int to, char kind, int mb, Parcel p) override {
    const int rank = owner_(to);
    if (rank == group_.rank()) return local_.send(from, to, kind, mb, std::move(p));
    dist::send_message(group_, p.message, {from, to, kind, mb, rank, channels_.find(from, to), links_.to(rank)},
                       sizes_);
  }
  Parcel receive(int to, int from, char kind, int mb) override {
    if (!remote_.remote(from)) return local_.receive(to, from, kind, mb);
    return remote_.take(placement_.at(static_cast<size_t>(to)), to, from, kind, mb);
  }
  // The members of a collective meet in its GroupAllReduce (ProcessWorld::all_reduce), those
  // of one process first and then every process's in the subgroup's all-gather, so there is
  // nothing to wait for here.
  void collective_barrier(int, int) override {}

 private:
  dist::ProcessGroup& group_;
  Mailboxes& local_;
  RemoteReceives& remote_;
  std::function<int(int)> owner_;  ///< stage -> rank
  std::vector<int> placement_;     ///< stage -> device
  const DeviceChannels& channels_;
  const HostLinks& links_;
  dist::WireSizes& sizes_;
};

/// Passes everything through, except that results on a rank that does not report them
/// are kept, to be sent to the rank that does.
class RelayFeed : public Feed {
 public:
  RelayFeed(Feed& inner, bool keep) : inner_(inner), keep_(keep) {}
  at::Tensor input(int mb) override { return inner_.input(mb); }
  at::Tensor target(int mb) override { return inner_.target(mb); }
  double loss_scale(int mb) override { return inner_.loss_scale(mb); }
  at::Tensor example_ids(int mb) override { return inner_.example_ids(mb); }
  nn::SequenceSegment segment(int mb) override { return inner_.segment(mb); }
  at::Tensor documents(int mb) override { return inner_.documents(mb); }
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

/// Point-to-point tags of relay_results (this and the next; ProcessWorld::gather_weights
/// starts 16 above).
constexpr int kResultsTag = (1 << 30);

}  // namespace

DistributedExecutor::DistributedExecutor(DistributedOptions options)
    : Configured(std::move(options)),
      world_(dist::GroupOptions{options_.rank, options_.world_size,
                                dist::Endpoint::parse(options_.master, "executor.master"), options_.timeout_s}) {
  if (options_.rank >= options_.world_size) {
    throw UserError(fmt::format("executor.rank {} is not below executor.world_size {}. Fix: ranks are 0..{}.",
                                options_.rank, options_.world_size, options_.world_size - 1));
  }
}

DistributedExecutor::~DistributedExecutor() = default;

void DistributedExecutor::run(const Schedule& schedule, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) {
  const auto start = std::chrono::steady_clock::now();
  const Schedule s = with_communication(schedule);
  const int n = static_cast<int>(slots.size());
  if (!world_.attached()) {
    std::vector<int> placement = s.placement();
    for (int& d : placement) d = std::max(d, 0);
    world_.attach(placement);
  }
  const int devices = world_.devices();
  PIPELAB_ASSERT(s.devices() <= devices, "the schedule has {} devices, the processes were set up for {}", s.devices(),
                 devices);
  if (!threads_) {
    int local = 0;
    for (int d = 0; d < devices; ++d) local += world_.owns_device(d);
    const int per_device = options_.intra_op_threads > 0 ? options_.intra_op_threads
                                                         : std::max(1, at::get_num_threads() / std::max(local, 1));
    threads_ = std::make_unique<StageThreads>(devices, per_device);
  }
  if (stats_.stages() != slots.size()) stats_.reset(n);
  stats_.meter_devices(s);
  begin_run(slots, s, mode);
  const bool writer = world_.writes_results();
  RelayFeed relay(feed, !writer);
  Mailboxes local(n);
  dist::ProcessGroup& group = world_.group();
  const auto stage_owner = [this](int stage) { return world_.stage_owner(stage); };
  std::vector<c10::Device> stage_devices;
  for (const StageSlot& slot : slots) stage_devices.push_back(slot.stage->device());
  // `shm` keeps CUDA tensors on the host path; `nccl` takes shared memory where it can for the rest.
  channels_.connect(options_.backend == "shm" ? "gloo" : options_.backend, world_, stage_devices, s);
  links_.connect(options_.backend == "nccl" ? "auto" : options_.backend, world_, s, shm_options());
  std::vector<DeviceWork> work = device_work(s);
  const auto local_device = [this](int d) { return world_.owns_device(d); };
  RemoteLinks links{stage_owner, [this](int from, int to) { return channels_.find(from, to); },
                    [&stage_devices](int stage) { return stage_devices.at(static_cast<size_t>(stage)); },
                    &wire_sizes_, &links_};
  RemoteReceives remote(s, group, local_device, std::move(links));
  GroupTransport transport(group, local, remote, stage_owner, s.placement(), channels_, links_, wire_sizes_);
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
  relay_results(slots, relay.kept(), feed);
  group.complete_sends();
  wire_sizes_.end_run();
  end_run(slots, mode);
  stats_.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

dist::ShmOptions DistributedExecutor::shm_options() const {
  dist::ShmOptions o;
  o.ring_bytes = static_cast<int64_t>(options_.shm_mib * (1 << 20));
  o.spin_us = options_.spin_us;
  o.timeout_seconds = options_.timeout_s;
  return o;
}

void DistributedExecutor::relay_results(const std::vector<StageSlot>& slots,
                                        std::vector<std::pair<int, MicroBatchResult>>& kept, Feed& feed) {
  dist::ProcessGroup& group = world_.group();
  const int writer = world_.stage_owner(world_.stages() - 1);
  // Results come from the stages that compute a loss (a replica's last): every rank knows
  // which ranks hold one, and only those send (nothing to wait for from the others).
  std::vector<bool> reports(static_cast<size_t>(world_.size()), false);
  for (size_t st = 0; st < slots.size(); ++st) {
    if (slots[st].stage->is_last()) reports[static_cast<size_t>(world_.stage_owner(static_cast<int>(st)))] = true;
  }
  if (world_.rank() != writer) {
    if (!reports[static_cast<size_t>(world_.rank())]) return;
    // Rows of (micro-batch, loss, hits, count, predictions, confusion matrix's cells...); the loss keeps
    // its bits through double, and the counts are exact below 2^53.
    const int64_t cells = kept.empty() || !kept.front().second.confusion.defined()
                              ? 0
                              : kept.front().second.confusion.numel();
    at::Tensor rows = at::zeros({static_cast<int64_t>(kept.size()), 5 + cells}, at::kDouble);
    for (size_t i = 0; i < kept.size(); ++i) {
      const MicroBatchResult& r = kept[i].second;
      const auto row = static_cast<int64_t>(i);
      rows[row][0] = kept[i].first;
      rows[row][1] = r.loss.item<double>();
      rows[row][2] = r.correct.item<double>();
      rows[row][3] = static_cast<double>(r.count);
      rows[row][4] = static_cast<double>(r.predictions);
      if (cells) rows[row].narrow(0, 5, cells).copy_(r.confusion.flatten().to(at::kDouble));
    }
    group.send(at::tensor({static_cast<int64_t>(kept.size()), cells}, at::kLong), writer, kResultsTag);
    if (!kept.empty()) group.send(rows, writer, kResultsTag + 1);
    return;
  }
  for (int p = 0; p < world_.size(); ++p) {
    if (p == writer || !reports[static_cast<size_t>(p)]) continue;
    at::Tensor header = at::empty({2}, at::kLong);
    group.recv(header, p, kResultsTag);
    const int64_t count = header[0].item<int64_t>(), cells = header[1].item<int64_t>();
    if (count == 0) continue;
    at::Tensor rows = at::empty({count, 5 + cells}, at::kDouble);
    group.recv(rows, p, kResultsTag + 1);
    auto a = rows.accessor<double, 2>();
    const auto side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(cells))));
    for (int64_t i = 0; i < rows.size(0); ++i) {
      MicroBatchResult r;
      r.loss = at::scalar_tensor(a[i][1], at::kDouble);
      r.correct = at::scalar_tensor(static_cast<int64_t>(a[i][2]), at::kLong);
      r.count = static_cast<int64_t>(a[i][3]);
      r.predictions = static_cast<int64_t>(a[i][4]);
      if (cells) r.confusion = rows[i].narrow(0, 5, cells).to(at::kLong).view({side, side});
      feed.on_result(static_cast<int>(a[i][0]), r);
    }
  }
}

PIPELAB_REGISTER(Executor, DistributedExecutor, "distributed",
                 "one process per device (or group of devices) over c10d (Gloo); same numbers as sequential");

}  // namespace pipelab
