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

class SequentialExecutor : public Configured<Executor, SequentialOptions> {
 public:
  using Configured::Configured;

  void run(const Schedule& s, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) override {
    const auto start = std::chrono::steady_clock::now();
    if (stats_.forward.size() != slots.size()) stats_.reset(static_cast<int>(slots.size()));
    begin_run(slots, s.micro_batches(), mode);
    // (receiving stage, 'F' or 'B', micro-batch) -> message
    std::map<std::tuple<int, char, int>, Message> mailbox;
    const auto take = [&](int r, char kind, int mb) {
      auto it = mailbox.find({r, kind, mb});
      PIPELAB_ASSERT(it != mailbox.end(), "stage {} has no {} message for micro-batch {}", r, kind, mb);
      Message m = std::move(it->second);
      mailbox.erase(it);
      return m;
    };
    const int last = s.stages() - 1;
    const WalkResult walk = walk_schedule(s, [&](int r, size_t i) {
      const Action& a = s.stage(r)[i];
      StageSlot& slot = slots[static_cast<size_t>(r)];
      switch (a.kind) {
        case ActionKind::Forward: {
          Message out = run_forward(slot, a.mb, r > 0 ? take(r, 'F', a.mb) : Message{}, feed, mode, stats_);
          if (r < last) {
            stats_.bytes_forward[static_cast<size_t>(r)] += out.bytes();
            ++stats_.messages_forward[static_cast<size_t>(r)];
            mailbox[{r + 1, 'F', a.mb}] = std::move(out);
          }
          break;
        }
        case ActionKind::Backward: {
          const bool receives = s.backward_chain && r < last;
          Message out = run_backward(slot, a.mb, receives ? take(r, 'B', a.mb) : Message{}, stats_);
          if (s.backward_chain && r > 0) {
            stats_.bytes_backward[static_cast<size_t>(r - 1)] += out.bytes();
            ++stats_.messages_backward[static_cast<size_t>(r - 1)];
            mailbox[{r - 1, 'B', a.mb}] = std::move(out);
          }
          break;
        }
        case ActionKind::Update: run_update(slot, stats_); break;
      }
    });
    PIPELAB_ASSERT(walk.complete, "the schedule deadlocked; it should have been validated");
    PIPELAB_ASSERT(mailbox.empty(), "{} messages were never received", mailbox.size());
    end_run(slots, mode);
    stats_.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

}  // namespace

PIPELAB_REGISTER(Executor, SequentialExecutor, "sequential",
                 "one thread, deterministic order; the numerical reference for every executor");

}  // namespace pipelab
