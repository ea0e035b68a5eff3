/// The step loop (core/run/step_loop.h).
#include "core/run/step_loop.h"

#include <chrono>
#include <cmath>
#include <optional>

#include "core/assembly/run_parts.h"
#include "core/feed/batch_dump.h"
#include "core/feed/feeds.h"
#include "core/feed/run_feeds.h"
#include "core/feed/shadow_sync.h"
#include "core/run/classification_metrics.h"
#include "core/run/evaluation.h"
#include "core/schedule/generators.h"
#include "core/util/clock.h"
#include "core/util/memory_meter.h"
#include "core/util/progress.h"

namespace pipelab {
struct StepLoop::EpochTally {
  LossTotals totals;
  int64_t steps = 0;      ///< mini-batches finished
  int64_t last_step = 0;  ///< the global step of its last one
  double finished = 0;    ///< seconds into the pass when its last one finished
};

StepLoop::StepLoop(const Experiment& experiment, RunParts& parts, RunRecorder& recorder, RunCheckpoints& checkpoints,
                   bool quiet, SimulatedClock clock)
    : e_(experiment),
      parts_(parts),
      recorder_(recorder),
      checkpoints_(checkpoints),
      quiet_(quiet),
      clock_(std::move(clock)) {}

int StepLoop::epochs_to_run() const {
  if (e_.run.max_steps <= 0) return e_.run.epochs;
  const int64_t per_epoch = std::max<int64_t>(parts_.train->batches(), 1);
  return static_cast<int>(std::min<int64_t>(e_.run.epochs, (e_.run.max_steps + per_epoch - 1) / per_epoch));
}

const Schedule& StepLoop::training_schedule(const std::vector<int>& units) {
  auto it = schedules_.find(units);
  if (it == schedules_.end()) it = schedules_.emplace(units, parts_.plan.training(units)).first;
  return it->second;
}

std::vector<EpochMetrics> StepLoop::train(int first, int epochs, int64_t& global_step, bool& diverged) {
  Executor& executor = *e_.executor;
  executor.stats().trace = e_.run.trace && first + epochs == epochs_to_run();
  executor.stats().reset(parts_.stage_count());
  // This thread frees what the actions leave behind (a mini-batch's messages and results):
  // the meter must hear of those frees too, or the stages' counts would drift.
  MemoryMeter::Install metered(executor.stats().memory);
  MemoryMeter::QuietAllocatorLog quiet(executor.stats().memory);
  measured_ = {};
  parts_.train->start_epoch(first);
  const int64_t per_epoch = parts_.train->batches();
  // run.max_steps cuts the run short; the pass that reaches it is the last.
  int64_t steps = per_epoch * epochs;
  if (e_.run.max_steps > 0) steps = std::min(steps, e_.run.max_steps - global_step);
  Progress progress(epochs == 1 ? fmt::format("epoch {}/{}", first + 1, epochs_to_run())
                                : fmt::format("{} epochs, never flushed", epochs),
                    steps, e_.run.progress && !quiet_);
  std::vector<EpochTally> tally(static_cast<size_t>(epochs));
  for (EpochTally& t : tally) t.last_step = global_step - 1;
  const auto start = std::chrono::steady_clock::now();
  {
    // The weights after each epoch, when the pass evaluates several afterwards.
    const std::unique_ptr<EpochSnapshots> snapshots = epochs > 1 ? checkpoints_.watch_epochs(per_epoch) : nullptr;
    run_schedules(first, steps, per_epoch, progress, tally, global_step, diverged);
  }
  executor.stats().read_memory_peaks();
  executor.world().merge_stats(executor.stats());
  measured_.stats = executor.stats();
  tally.back().finished = seconds_since(start);
  const double wait = parts_.train->take_wait_seconds() / std::max(tally.back().finished, 1e-9);
  std::vector<EpochMetrics> out;
  for (size_t k = 0; k < tally.size(); ++k) {
    EpochMetrics m = epoch_figures(first + static_cast<int>(k), tally[k],
                                   tally[k].finished - (k ? tally[k - 1].finished : 0));
    m.data_wait_fraction = wait;
    out.push_back(m);
  }
  progress.finish(fmt::format("loss {:.4f}", out.back().train_loss));
  return out;
}

void StepLoop::run_schedules(int first, int64_t steps, int64_t per_epoch, Progress& progress,
                             std::vector<EpochTally>& tally, int64_t& global_step, bool& diverged) {
  Executor& executor = *e_.executor;
  const auto start = std::chrono::steady_clock::now();
  int64_t done = 0;
  // Records one finished mini-batch (in order; from a device thread, or after its run).
  const RunFeed::Done finished = [&](int64_t mb, const LossTotals& totals) {
    EpochTally& t = tally[static_cast<size_t>(mb / per_epoch)];
    const int epoch = first + static_cast<int>(mb / per_epoch);
    t.totals.add(totals);
    t.last_step = global_step;
    // Every step is a whole mini-batch: the simulated clock runs in equal steps.
    const double simulated = clock_.on() ? static_cast<double>(global_step + 1) * clock_.step_seconds : std::nan("");
    recorder_.record().step({global_step, epoch + 1, totals.loss, parts_.lr_at(global_step), simulated});
    ++global_step;
    ++t.steps;
    progress.update(++done, fmt::format("loss {:.4f}", totals.loss));
    if (!std::isfinite(totals.loss)) diverged = true;
    if ((mb + 1) % per_epoch == 0) t.finished = seconds_since(start);
  };
  const int64_t per_run = parts_.plan.mini_batches_per_run(steps);
  const bool one_process = executor.world().process_name().empty();
  for (int64_t g = 0; g < steps && !diverged; g += per_run) {
    const RunFeed::Window window{first, per_epoch, g, std::min(per_run, steps - g)};
    const std::unique_ptr<RunFeed> feed =
        plan_feed(parts_.plan, *parts_.train, parts_.dtype, window, finished, one_process);
    ShadowFeed shadowed(feed->feed(), parts_.shadow.get());
    // A flushed step's units are its micro-batches; a pipeline that runs on takes a step a unit.
    std::optional<DumpFeed> dumped;
    if (dump_ && dump_->wants(global_step)) dumped.emplace(shadowed, *dump_, global_step, per_run > 1);
    Feed& fed = dumped ? static_cast<Feed&>(*dumped) : shadowed;
    const auto run_start = std::chrono::steady_clock::now();
    executor.run(training_schedule(parts_.plan.run_units(e_.run.batch_size, window.count)), parts_.slots, fed,
                 RunMode::Train);
    feed->finish();
    measured_.add_run(seconds_since(run_start), window.count);
    // Only the writer sees the losses; every process must stop at the same run.
    diverged = executor.world().from_writer(diverged);
    recorder_.collect_stage_metrics(first + static_cast<int>((g + window.count - 1) / per_epoch) + 1);
  }
}

EpochMetrics StepLoop::epoch_figures(int epoch, const EpochTally& tally, double seconds) const {
  EpochMetrics m;
  m.epoch = epoch + 1;
  m.train_seconds = seconds;
  m.train_loss = tally.steps ? tally.totals.loss / static_cast<double>(tally.steps) : 0;
  m.train_acc = percent_of(tally.totals.correct, tally.totals.predictions);
  m.samples_per_second = static_cast<double>(tally.totals.count) / std::max(seconds, 1e-9);
  m.lr = parts_.lr_at(tally.last_step);
  if (clock_.on()) m.simulated_seconds = static_cast<double>(tally.steps) * clock_.step_seconds;
  const ExecStats& st = measured_.stats;
  // Traffic per step over the whole pass the stats cover.
  int64_t forward = 0, backward = 0, runs = 0;
  for (size_t k = 0; k < st.bytes_forward.size(); ++k) {
    forward += st.bytes_forward[k];
    backward += st.bytes_backward[k];
  }
  for (const ActionTime& u : st.time[ActionKind::Update]) runs = std::max(runs, u.count);
  m.bytes_forward_per_step = static_cast<double>(forward) / static_cast<double>(std::max<int64_t>(runs, 1));
  m.bytes_backward_per_step = static_cast<double>(backward) / static_cast<double>(std::max<int64_t>(runs, 1));
  return m;
}

void StepLoop::evaluate(EpochMetrics& m) {
  const auto start = std::chrono::steady_clock::now();
  const Evaluation r = evaluate_model(e_, parts_, *parts_.test, eval_schedule_);
  m.test_loss = r.loss;
  m.test_acc = r.acc;
  m.test_mcc = r.mcc;
  m.eval_seconds = seconds_since(start);
}

}  // namespace pipelab
