/// The threaded executor (docs/design.md, "Executors"): one thread per stage, each following its
/// own action list, messages through blocking mailboxes. With every stage on one device this
/// is the simulated mode with threads (as the interlocking-backprop library runs it); with
/// stage i on device i (`run.devices: [cuda:0, cuda:1, ...]`) it is true model parallelism,
/// each stage on its own CUDA stream. The numbers equal the sequential executor's bit for
/// bit: every action runs through exec/actions.h and depends only on its stage's order.
#include <chrono>
#include <memory>

#include <ATen/Parallel.h>

#include "core/exec/actions.h"
#include "core/exec/mailboxes.h"
#include "core/exec/stage_threads.h"

namespace pipelab {
namespace {

struct ThreadedOptions {
  int intra_op_threads = 0;
  template <class V>
  void fields(V& v) {
    v("intra_op_threads", intra_op_threads,
      "LibTorch intra-op threads per stage thread (0: the run's threads divided by the stages, at least 1; "
      "OpenMP and BLAS threads multiply with the stages, so keep stages x this <= cores)",
      non_negative);
  }
};

class ThreadedExecutor : public Configured<Executor, ThreadedOptions> {
 public:
  using Configured::Configured;

  void run(const Schedule& s, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) override {
    const auto start = std::chrono::steady_clock::now();
    const int n = static_cast<int>(slots.size());
    if (stats_.forward.size() != slots.size()) stats_.reset(n);
    if (!threads_ || threads_->size() != n) threads_ = std::make_unique<StageThreads>(n, per_stage(n));
    begin_run(slots, s.micro_batches(), mode);
    Mailboxes mail(n);
    threads_->run(
        [&](int r) {
          StageSlot& slot = slots[static_cast<size_t>(r)];
          if (!slot.stage) return;
          device::StreamScope stream(slot.stage->device(), slot.stage->index());
          for (const Action& a : s.stage(r)) {
            // Checked between actions too, so a stage that never waits still stops soon.
            if (mail.cancelled()) throw Cancelled();
            run_action(s, r, a, slot, feed, mode, mail, stats_);
          }
        },
        [&] { mail.cancel(); });
    PIPELAB_ASSERT(mail.pending() == 0, "{} messages were never received", mail.pending());
    end_run(slots, mode);
    stats_.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  std::string thread_layout(int stages) const override {
    const int m = per_stage(stages);
    return fmt::format("{} stage thread{} x {} intra-op thread{}", stages, stages == 1 ? "" : "s", m, m == 1 ? "" : "s");
  }

 private:
  /// Decided on the caller's thread, whose count is the run's `threads` budget.
  int per_stage(int stages) const {
    return options_.intra_op_threads > 0 ? options_.intra_op_threads
                                         : std::max(1, at::get_num_threads() / std::max(stages, 1));
  }

  std::unique_ptr<StageThreads> threads_;
};

}  // namespace

PIPELAB_REGISTER(Executor, ThreadedExecutor, "threaded",
                 "one thread per stage (simulated on one device, or stage i on device i); same numbers as sequential");

}  // namespace pipelab
