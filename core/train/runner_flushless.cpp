/// flush: never — the mini-batches of every epoch flow through one pipeline (1F1B, or
/// 2BW's) that is drained only at the end of the run, so the warm-up of epoch e+1 overlaps
/// the drain of epoch e. "The model after epoch e" is, at each stage, the weights right after
/// the update that applies the gradient of epoch e's last micro-batch there (stages reach it
/// at different times). Each stage saves those weights then (from its own thread or process,
/// so this works on every executor, into its own process's folder; the observer that does it
/// is in runner_flushless.h); after the run every epoch is evaluated on them, each process
/// loading its own stages'. Such a run cannot resume mid-way.
#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/scheme/replicas.h"
#include "core/train/feeds.h"
#include "core/train/runner.h"
#include "core/train/runner_flushless.h"
#include "core/train/shadow_sync.h"
#include "core/train/state_dict.h"
#include "core/util/memory_meter.h"
#include "core/util/progress.h"

namespace pipelab {

EpochSnapshot::EpochSnapshot(std::string folder, int64_t per_epoch)
    : folder_(std::move(folder)), per_epoch_(per_epoch) {}

std::string EpochSnapshot::path(const std::string& folder, int64_t epoch, int stage) {
  return fmt::format("{}/epoch_{}_stage_{}.pt", folder, epoch, stage);
}

void EpochSnapshot::backward_done(Stage&, int mb) {
  if ((mb + 1) % per_epoch_ == 0) finished_.push_back((mb + 1) / per_epoch_);
}

void EpochSnapshot::after_update(Stage& s) {
  // The epoch ends with the update that applies its last micro-batch's gradient. Counting
  // micro-batches rather than optimizer steps keeps this right for schemes that step once per
  // several micro-batches (pipedream_2bw) and for fp16 updates skipped after an overflow.
  for (const int64_t epoch : finished_) save_tensor_dict(path(folder_, epoch, s.index()), model_state({&s}));
  finished_.clear();
}

namespace {

std::string snapshot_folder(const RunRecord& record) { return record.checkpoint_path("flushless"); }

/// One EpochSnapshot observer per pipeline stage, on the first of its replicas that this
/// process runs (every replica of a stage holds the same weights after an update, and
/// replica 0 evaluates): each process keeps the snapshots of its own stages in its own
/// folder, and loads them from there. Detached however the run ends.
class SnapshotObservers {
 public:
  SnapshotObservers(std::vector<StageSlot>& slots, const World& world, int stages, const std::string& folder,
                    int64_t per_epoch)
      : slots_(slots) {
    for (int p = 0; p < stages; ++p) {
      for (size_t i = static_cast<size_t>(p); i < slots.size(); i += static_cast<size_t>(stages)) {
        if (!world.runs_stage(static_cast<int>(i))) continue;
        snapshots_.push_back(std::make_unique<EpochSnapshot>(folder, per_epoch));
        slots[i].observers.push_back(snapshots_.back().get());
        observed_.push_back(i);
        break;
      }
    }
  }
  ~SnapshotObservers() {
    for (const size_t i : observed_) slots_[i].observers.pop_back();
  }
  SnapshotObservers(const SnapshotObservers&) = delete;
  SnapshotObservers& operator=(const SnapshotObservers&) = delete;

 private:
  std::vector<StageSlot>& slots_;
  std::vector<std::unique_ptr<EpochSnapshot>> snapshots_;
  std::vector<size_t> observed_;
};

}  // namespace

std::vector<EpochMetrics> Runner::train_flushless(RunRecord& record, int64_t& global_step, bool& diverged) {
  Executor& executor = *e_.executor;
  executor.stats().trace = e_.run.trace;
  executor.stats().reset(stage_count());
  // This thread frees what the actions leave behind: the meter must hear of it (as in
  // train_epoch).
  MemoryMeter::Install metered(executor.stats().memory);
  MemoryMeter::QuietAllocatorLog quiet(executor.stats().memory);
  const int epochs = e_.run.epochs;
  const int64_t per_epoch = train_->batches();
  std::filesystem::create_directories(snapshot_folder(record));
  const SnapshotObservers snapshots(slots_, e_.executor->world(), plan_.stages(), snapshot_folder(record), per_epoch);
  Progress progress(fmt::format("{} epochs, never flushed", epochs), per_epoch * epochs, e_.run.progress && !options_.quiet);
  std::vector<LossTotals> totals(static_cast<size_t>(epochs));
  std::vector<double> finished_at(static_cast<size_t>(epochs), 0);
  const auto start = std::chrono::steady_clock::now();
  LoaderFeed feed(*train_, dtype_, [&](int mb, const MicroBatchResult& r) {
    const int epoch = static_cast<int>(mb / per_epoch);
    const double loss = totals[static_cast<size_t>(epoch)].add(r);
    record.step({global_step, epoch + 1, loss, lr_at(global_step)});
    ++global_step;
    progress.update(global_step, fmt::format("loss {:.4f}", loss));
    if (!std::isfinite(loss)) diverged = true;
    if ((mb + 1) % per_epoch == 0) {
      finished_at[static_cast<size_t>(epoch)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }, per_epoch);
  const int units = static_cast<int>(per_epoch * epochs);
  ReplicaFeed shares(feed, plan_.replicas(), units, e_.executor->world().process_name().empty());
  // Replicated stages ask for their mini-batches from several threads: the shares feed
  // (one share each) fetches them and reports their results in order.
  ShadowFeed shadowed(plan_.copies() > 1 ? static_cast<Feed&>(shares) : feed, shadow_.get());
  traced_steps_ = {};
  const auto run_start = std::chrono::steady_clock::now();
  executor.run(train_schedule(plan_.run_units(e_.run.batch_size, units)), slots_, shadowed, RunMode::Train);
  traced_steps_.add(std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count(),
                    per_epoch * epochs);
  executor.stats().read_memory_peaks();
  executor.world().merge_stats(executor.stats());
  last_train_stats_ = executor.stats();
  collect_stage_metrics(record, epochs);  // one pipeline: its measurements all land in the last epoch
  progress.finish();
  const double wait = train_->take_wait_seconds();
  std::vector<EpochMetrics> out;
  for (int e = 0; e < epochs; ++e) {
    const double seconds = finished_at[static_cast<size_t>(e)] - (e ? finished_at[static_cast<size_t>(e - 1)] : 0);
    EpochMetrics m = epoch_figures(e, totals[static_cast<size_t>(e)], per_epoch, seconds);
    m.lr = lr_at((e + 1) * per_epoch - 1);
    m.data_wait_fraction = wait / std::max(finished_at.back(), 1e-9);
    out.push_back(m);
  }
  return out;
}

void Runner::load_flushless_snapshot(const RunRecord& record, int epoch) {
  // One replica of each stage this process runs saved it; every replica here takes it.
  const std::vector<Stage*> all = stages();
  for (size_t i = 0; i < all.size(); ++i) {
    if (!e_.executor->world().runs_stage(static_cast<int>(i))) continue;
    Stage* s = all[i];
    const std::string path = EpochSnapshot::path(snapshot_folder(record), epoch, s->index());
    load_model_state({s}, load_tensor_dict(path), true, path);
  }
  for (int p = 0; p < plan_.stages(); ++p) {
    std::filesystem::remove(EpochSnapshot::path(snapshot_folder(record), epoch, p));
  }
  if (epoch == e_.run.epochs) std::filesystem::remove_all(snapshot_folder(record));
}

}  // namespace pipelab
