/// The reference executor: one thread, one deterministic global order (round-robin over
/// the stages, one ready action each; schedule/dataflow.h). Messages wait in a mailbox.
#include <chrono>
#include <map>
#include <tuple>

#include "core/exec/actions.h"
#include "core/schedule/dataflow.h"

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
  void send(int, int to, ActionKind kind, int mb, Parcel p) override {
    mailbox_[{to, static_cast<char>(kind), mb}] = std::move(p);
  }
  Parcel receive(int to, int, ActionKind kind, int mb) override {
    auto it = mailbox_.find({to, static_cast<char>(kind), mb});
    PIPELAB_ASSERT(it != mailbox_.end(), "stage {} has no {} message for micro-batch {}", to, static_cast<char>(kind), mb);
    Parcel p = std::move(it->second);
    mailbox_.erase(it);
    return p;
  }
  void update_barrier(int) override {}
  size_t pending() const { return mailbox_.size(); }

 private:
  std::map<std::tuple<int, char, int>, Parcel> mailbox_;  ///< (receiver, sending kind, micro-batch)
};

class SequentialExecutor : public Configured<Executor, SequentialOptions> {
 public:
  using Configured::Configured;

  void run(const Schedule& s, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) override {
    const auto start = std::chrono::steady_clock::now();
    if (stats_.forward.size() != slots.size()) stats_.reset(static_cast<int>(slots.size()));
    begin_run(slots, s.micro_batches(), mode);
    MapTransport transport;
    const WalkResult walk = walk_schedule(s, [&](int r, size_t i) {
      run_action(s, r, s.stage(r)[i], slots[static_cast<size_t>(r)], feed, mode, transport, stats_);
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
