/// The reference executor: one thread, one deterministic global order (round-robin over
/// the devices, one ready action each; schedule/dataflow.h). Messages wait in a map.
#include <chrono>
#include <map>
#include <tuple>

#include "core/exec/actions.h"
#include "core/schedule/dataflow.h"
#include "core/schedule/lower.h"

namespace pipelab {
namespace {

struct SequentialOptions {
  template <class V>
  void fields(V&) {}
};

/// Messages in one thread: the dataflow walk only runs an action once its inputs were
/// sent, so a missing message is a bug, never a wait. The walk is the update barrier.
class MapTransport : public Transport {
 public:
  void send(int, int to, char kind, int mb, Parcel p) override { mailbox_[{to, kind, mb}] = std::move(p); }
  Parcel receive(int to, int, char kind, int mb) override {
    auto it = mailbox_.find({to, kind, mb});
    PIPELAB_ASSERT(it != mailbox_.end(), "stage {} has no {} message for micro-batch {}", to, static_cast<char>(kind), mb);
    Parcel p = std::move(it->second);
    mailbox_.erase(it);
    return p;
  }
  void collective_barrier(int, int) override {}
  size_t pending() const { return mailbox_.size(); }

 private:
  std::map<std::tuple<int, char, int>, Parcel> mailbox_;  ///< (receiver, sending kind, micro-batch)
};

class SequentialExecutor : public Configured<Executor, SequentialOptions> {
 public:
  using Configured::Configured;

  void run(const Schedule& schedule, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) override {
    const auto start = std::chrono::steady_clock::now();
    const Schedule s = with_communication(schedule);
    if (stats_.stages() != slots.size()) stats_.reset(static_cast<int>(slots.size()));
    stats_.meter_devices(s);
    begin_run(slots, s, mode);
    MemoryMeter::Install metered(stats_.memory);  // every action runs on this thread
    MapTransport transport;
    std::vector<DeviceWork> work = device_work(s);
    const WalkResult walk = walk_schedule(s, [&](int d, size_t i) {
      const Action& a = s.device(d)[i];
      run_action(i, work[static_cast<size_t>(d)], slots.at(static_cast<size_t>(a.stage)), feed, mode, transport, stats_);
    });
    PIPELAB_ASSERT(walk.complete, "the schedule deadlocked; it should have been validated");
    PIPELAB_ASSERT(transport.pending() == 0, "{} messages were never received", transport.pending());
    end_run(slots, mode);
    stats_.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

}  // namespace

PIPELAB_REGISTER(Executor, SequentialExecutor, "sequential",
                 "one thread, deterministic order; the numerical reference for every executor");

}  // namespace pipelab
