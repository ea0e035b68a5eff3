/// The threaded executor (docs/design.md, "Executors"): one thread per device, each following its
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
#include "core/schedule/lower.h"

namespace pipelab {
namespace {

struct ThreadedOptions {
  int intra_op_threads = 0;
  double spin_us = 100;
  template <class V>
  void fields(V& v) {
    v("spin_us", spin_us,
      "microseconds a device thread polls for a message before it sleeps (a wake-up costs tens of microseconds)",
      non_negative);
    v("intra_op_threads", intra_op_threads,
      "LibTorch intra-op threads per device thread (0: the run's threads divided by the devices, at least 1; "
      "OpenMP and BLAS threads multiply with the devices, so keep devices x this <= cores)",
      non_negative);
  }
};

class ThreadedExecutor : public Configured<Executor, ThreadedOptions> {
 public:
  using Configured::Configured;

  void run(const Schedule& schedule, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) override {
    const auto start = std::chrono::steady_clock::now();
    const Schedule s = with_communication(schedule);
    const int n = static_cast<int>(slots.size());
    if (stats_.stages() != slots.size()) stats_.reset(n);
    stats_.meter_devices(s);
    const int devices = s.devices();
    if (!threads_ || threads_->size() != devices) threads_ = std::make_unique<StageThreads>(devices, per_device(devices));
    begin_run(slots, s, mode);
    Mailboxes mail(n, options_.spin_us * 1e-6);
    std::vector<DeviceWork> work = device_work(s);
    threads_->run(
        [&](int d) {
          const auto& actions = s.device(d);
          if (actions.empty()) return;
          // One stream per device thread: its stages' work is ordered as the list says.
          device::StreamScope stream(slots.at(static_cast<size_t>(actions.front().stage)).stage->device(), d);
          MemoryMeter::Install metered(stats_.memory);
          for (size_t i = 0; i < actions.size(); ++i) {
            // Checked between actions too, so a device that never waits still stops soon.
            if (mail.cancelled()) throw Cancelled();
            run_action(i, work[static_cast<size_t>(d)], slots.at(static_cast<size_t>(actions[i].stage)), feed, mode,
                       mail, stats_);
          }
        },
        [&] { mail.cancel(); });
    PIPELAB_ASSERT(mail.pending() == 0, "{} messages were never received", mail.pending());
    end_run(slots, mode);
    stats_.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  std::string thread_layout(int devices) const override {
    const int m = per_device(devices);
    return fmt::format("{} device thread{} x {} intra-op thread{}", devices, devices == 1 ? "" : "s", m, m == 1 ? "" : "s");
  }

 private:
  /// Decided on the caller's thread, whose count is the run's `threads` budget.
  int per_device(int devices) const {
    return options_.intra_op_threads > 0 ? options_.intra_op_threads
                                         : std::max(1, at::get_num_threads() / std::max(devices, 1));
  }

  std::unique_ptr<StageThreads> threads_;
};

}  // namespace

PIPELAB_REGISTER(Executor, ThreadedExecutor, "threaded",
                 "one thread per device (simulated on one device, or device i on run.devices[i]); same numbers as sequential");

}  // namespace pipelab
