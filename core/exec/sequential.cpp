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
    // (receiving stage, kind of the sending action, micro-batch) -> message
    std::map<std::tuple<int, char, int>, Message> mailbox;
    const auto post = [&](int from, int to, ActionKind kind, int mb, Message m) {
      count_message(stats_, from, to, m);
      mailbox[{to, static_cast<char>(kind), mb}] = std::move(m);
    };
    const auto take = [&](int r, ActionKind kind, int mb) {
      auto it = mailbox.find({r, static_cast<char>(kind), mb});
      PIPELAB_ASSERT(it != mailbox.end(), "stage {} has no {} message for micro-batch {}", r, static_cast<char>(kind), mb);
      Message m = std::move(it->second);
      mailbox.erase(it);
      return m;
    };
    const int last = s.stages() - 1;
    const bool pipeline = s.links.forward == Links::Forward::Pipeline;
    const WalkResult walk = walk_schedule(s, [&](int r, size_t i) {
      const Action& a = s.stage(r)[i];
      StageSlot& slot = slots[static_cast<size_t>(r)];
      switch (a.kind) {
        case ActionKind::Forward: {
          const bool receives = pipeline && r > 0;
          Message out = run_forward(slot, a.mb, receives ? take(r, a.kind, a.mb) : Message{}, !pipeline, feed, mode, stats_);
          if (pipeline && r < last) post(r, r + 1, a.kind, a.mb, std::move(out));
          break;
        }
        case ActionKind::Head:
        case ActionKind::Backward: {
          std::vector<Message> in;
          if (a.kind == ActionKind::Backward && r < last) {
            for (const ActionKind k : s.links.backward_inputs) in.push_back(take(r, k, a.mb));
          }
          Message out = a.kind == ActionKind::Head ? run_head(slot, a.mb, stats_) : run_backward(slot, a.mb, in, stats_);
          if (r > 0 && s.links.sends_back(a.kind)) post(r, r - 1, a.kind, a.mb, std::move(out));
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
