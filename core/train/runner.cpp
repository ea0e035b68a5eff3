/// The training loop: epochs of schedule runs through the executor, evaluation, records.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include <fmt/ranges.h>

#include "core/io/safetensors.h"
#include "core/schedule/generators.h"
#include "core/schedule/timeline.h"
#include "core/scheme/replicas.h"
#include "core/train/classification_metrics.h"
#include "core/train/feeds.h"
#include "core/train/resume_point.h"
#include "core/train/runner.h"
#include "core/train/shadow_sync.h"
#include "core/train/stage_costs.h"
#include "core/train/trace.h"
#include "core/train/state_dict.h"
#include "core/train/training_state.h"
#include "core/util/memory_meter.h"
#include "core/util/progress.h"

namespace pipelab {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double percent(int64_t hits, int64_t count) {
  return count ? 100.0 * static_cast<double>(hits) / static_cast<double>(count) : 0.0;
}

}  // namespace

EpochMetrics Runner::train_epoch(int epoch, RunRecord& record, int64_t& global_step, bool& diverged) {
  Executor& executor = *e_.executor;
  executor.stats().trace = e_.run.trace && epoch + 1 == epochs_to_run();
  executor.stats().reset(stage_count());
  // This thread frees what the actions leave behind (a mini-batch's messages and results):
  // the meter must hear of those frees too, or the stages' counts would drift.
  MemoryMeter::Install metered(executor.stats().memory);
  MemoryMeter::QuietAllocatorLog quiet(executor.stats().memory);
  traced_steps_ = {};
  train_->start_epoch(epoch);
  // run.max_steps cuts the run short; the epoch that reaches it is the last.
  const int64_t steps = e_.run.max_steps > 0 ? std::min(train_->batches(), e_.run.max_steps - global_step)
                                             : train_->batches();
  Progress progress(fmt::format("epoch {}/{}", epoch + 1, epochs_to_run()), steps, e_.run.progress && !options_.quiet);
  LossTotals totals;
  int64_t done = 0;
  // Records one finished mini-batch; false once the loss is no longer finite.
  const auto finish_step = [&](double loss) {
    record.step({global_step, epoch + 1, loss, lr_at(global_step)});
    ++global_step;
    ++done;
    progress.update(done, fmt::format("loss {:.4f}", loss));
    return std::isfinite(loss);
  };
  const auto start = std::chrono::steady_clock::now();
  if (e_.scheme->span() == Span::MiniBatch) {
    train_mini_batches(epoch, steps, record, totals, finish_step, diverged);
  } else {
    train_epoch_pipeline(epoch, steps, record, totals, finish_step, diverged);
  }
  executor.stats().read_memory_peaks();
  executor.world().merge_stats(executor.stats());
  last_train_stats_ = executor.stats();
  EpochMetrics m = epoch_figures(epoch, totals, done, seconds_since(start));
  m.lr = lr_at(global_step - 1);
  m.data_wait_fraction = train_->take_wait_seconds() / std::max(m.train_seconds, 1e-9);
  progress.finish(fmt::format("loss {:.4f}", m.train_loss));
  return m;
}

void Runner::train_mini_batches(int epoch, int64_t steps, RunRecord& record, LossTotals& totals,
                                const StepDone& finish_step, bool& diverged) {
  Executor& executor = *e_.executor;
  for (int64_t j = 0; j < steps && !diverged; ++j) {
    const Batch batch = train_->batch(j);
    // Each replica's share of the mini-batch, split into its micro-batches, in order.
    std::vector<int64_t> sizes;
    std::vector<int> units;
    for (const auto& share : replica_chunk_sizes(batch.x.size(0), plan_.replicas(), e_.scheme->micro_batches())) {
      sizes.insert(sizes.end(), share.begin(), share.end());
      units.push_back(static_cast<int>(share.size()));
    }
    ChunkFeed feed(batch, sizes, dtype_);
    ShadowFeed shadowed(feed, shadow_.get());
    const auto run_start = std::chrono::steady_clock::now();
    executor.run(train_schedule(units), slots_, shadowed, RunMode::Train);
    traced_steps_.add(seconds_since(run_start), 1);
    totals.add(feed.totals());
    // Only the writer sees the loss; every process must stop at the same step.
    diverged = executor.world().from_writer(!finish_step(feed.totals().loss));
    collect_stage_metrics(record, epoch + 1);
  }
}

void Runner::train_epoch_pipeline(int epoch, int64_t steps, RunRecord& record, LossTotals& totals,
                                  const StepDone& finish_step, bool& diverged) {
  Executor& executor = *e_.executor;
  LoaderFeed feed(*train_, dtype_, [&](int, const MicroBatchResult& r) {
    if (!finish_step(totals.add(r))) diverged = true;
  });
  ReplicaFeed shares(feed, plan_.replicas(), static_cast<int>(steps), executor.world().process_name().empty());
  // Replicated stages ask for their mini-batches from several threads: the shares feed
  // (one share each) fetches them and reports their results in order.
  ShadowFeed shadowed(plan_.copies() > 1 ? static_cast<Feed&>(shares) : feed, shadow_.get());
  const auto run_start = std::chrono::steady_clock::now();
  executor.run(train_schedule(plan_.run_units(e_.run.batch_size, steps)), slots_, shadowed, RunMode::Train);
  traced_steps_.add(seconds_since(run_start), steps);
  collect_stage_metrics(record, epoch + 1);
}

EpochMetrics Runner::epoch_figures(int epoch, const LossTotals& totals, int64_t steps, double seconds) {
  EpochMetrics m;
  m.epoch = epoch + 1;
  m.train_seconds = seconds;
  m.train_loss = steps ? totals.loss / static_cast<double>(steps) : 0;
  m.train_acc = percent(totals.correct, totals.count * data_.spec.targets_per_example());
  m.samples_per_second = static_cast<double>(totals.count) / std::max(seconds, 1e-9);
  const ExecStats& st = last_train_stats_;
  // Traffic per step over the whole run the stats cover (one epoch, or all of a flushless run).
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

void Runner::evaluate(EpochMetrics& m) {
  const auto start = std::chrono::steady_clock::now();
  // The meter stays installed on the device threads: the test batches' frees of blocks it
  // never saw would make c10 log "Memory block of unknown size" every 1000 frees.
  MemoryMeter::QuietAllocatorLog quiet(e_.executor->stats().memory);
  test_->start_epoch(0);
  double loss_sum = 0;
  int64_t correct = 0, count = 0;
  at::Tensor confusion;  // summed over the test set where the data's metric needs it
  LoaderFeed feed(*test_, dtype_, [&](int, const MicroBatchResult& r) {
    loss_sum += r.loss.item<double>() * static_cast<double>(r.count);
    correct += r.correct.item<int64_t>();
    count += r.count;
    if (r.confusion.defined()) confusion = confusion.defined() ? confusion + r.confusion : r.confusion.clone();
  });
  // Replicas of the pipeline hold the same weights: replica 0 evaluates (with its own
  // batch-norm statistics, as DDP's rank 0 does).
  const int evaluating = plan_.stages();
  if (!eval_schedule_.stages()) {
    eval_schedule_ = schedules::forward_only(evaluating, static_cast<int>(test_->batches()),
                                             {plan_.placement().begin(), plan_.placement().begin() + evaluating});
  }
  std::vector<StageSlot> slots(slots_.begin(), slots_.begin() + evaluating);
  if (test_->batches() > 0) e_.executor->run(eval_schedule_, slots, feed, RunMode::Eval);
  m.test_loss = count ? loss_sum / static_cast<double>(count) : 0;
  m.test_acc = percent(correct, count * data_.spec.targets_per_example());
  if (confusion.defined()) m.test_mcc = 100 * matthews_correlation(confusion);
  m.eval_seconds = seconds_since(start);
}

void Runner::save_checkpoint(const RunRecord& record, const std::string& name) {
  // In a multi-process run the writing process first collects every stage's weights.
  e_.executor->world().gather_weights(slots_);
  if (record.is_log_only()) return;
  // Replicas of the pipeline hold the same weights: the checkpoint is replica 0's model.
  const std::vector<Stage*> model = replica_stages(0);
  const TensorDict weights = model_state(model);
  if (e_.run.checkpoint_format == RunOptions::CheckpointFormat::Safetensors) {
    save_safetensors(record.checkpoint_path(name + ".safetensors"), weights, {{"format", "pt"}});
  } else {
    save_tensor_dict(record.checkpoint_path(name + ".pt"), weights);
  }
}

std::vector<StagePolicy*> Runner::policies() const {
  std::vector<StagePolicy*> out;
  for (const auto& p : policies_) out.push_back(p.get());
  return out;
}

namespace {

/// The stages this process runs, and their policies: what its training state holds.
HeldStages own_stages(const World& world, const std::vector<Stage*>& stages, const std::vector<StagePolicy*>& policies) {
  HeldStages out;
  for (size_t i = 0; i < stages.size(); ++i) {
    if (!world.runs_stage(static_cast<int>(i))) continue;
    out.ids.push_back(static_cast<int>(i));
    out.stages.push_back(stages[i]);
    out.policies.push_back(policies[i]);
  }
  return out;
}

}  // namespace

void Runner::finish_epoch(RunRecord& record, RunSummary& summary, TrainingProgress& progress, const EpochMetrics& m,
                          bool save_state) {
  gather_stage_metrics(record);
  record.epoch(m);
  // Only the process that writes the records sees the losses (the others relay theirs to
  // it): a rank's own log says so rather than show zeros that look measured.
  const std::string line =
      e_.executor->world().writes_records()
          ? fmt::format("epoch {:>3}  train loss {:.4f}  acc {:6.2f}%  |  test loss {:.4f}  acc {:6.2f}%  |  lr {:.3g}  {}",
                        m.epoch, m.train_loss, m.train_acc, m.test_loss, m.test_acc, m.lr,
                        format_duration(m.seconds))
          : fmt::format("epoch {:>3}  done in {} (losses and accuracy: the writing process's log)", m.epoch,
                        format_duration(m.seconds));
  record.log(line);
  if (!options_.quiet) std::cout << line << std::endl;
  if (summary.history.empty() || m.test_acc > summary.best_test_acc) {
    summary.best_test_acc = m.test_acc;
    summary.best_epoch = m.epoch;
  }
  summary.history.push_back(m);
  progress.history.push_back(m);
  progress.epochs_done = m.epoch;
  if (e_.run.checkpoint_every > 0 && m.epoch % e_.run.checkpoint_every == 0) {
    save_checkpoint(record, fmt::format("epoch_{}", m.epoch));
  }
  if (save_state) {
    // Every process its own stages (core/train/resume_point.h).
    const HeldStages own = own_stages(e_.executor->world(), stages(), policies());
    save_state_keeping_previous(record.state_path(), [&](const std::string& path) {
      save_training_state(path, progress, own, codecs_.get());
    });
  }
}

namespace {

/// A line for the run's log, and the terminal unless quiet.
void announce(RunRecord& record, bool quiet, const std::string& text) {
  for (size_t p = 0, q; p < text.size(); p = q + 1) {
    q = text.find('\n', p);
    if (q == std::string::npos) q = text.size();
    record.log(text.substr(p, q - p));
  }
  if (!quiet) std::cout << text << (text.empty() || text.back() != '\n' ? "\n" : "") << std::flush;
}

/// The epochs an earlier session finished, into the summary (best accuracy first seen).
void add_history(RunSummary& summary, const std::vector<EpochMetrics>& history) {
  for (const EpochMetrics& m : history) {
    if (summary.history.empty() || m.test_acc > summary.best_test_acc) {
      summary.best_test_acc = m.test_acc;
      summary.best_epoch = m.epoch;
    }
    summary.history.push_back(m);
  }
}

/// The share of training time spent waiting for data, over every epoch.
double data_wait_fraction(const std::vector<EpochMetrics>& history) {
  double wait = 0, train_time = 0;
  for (const EpochMetrics& m : history) {
    wait += m.data_wait_fraction * m.train_seconds;
    train_time += m.train_seconds;
  }
  return train_time > 0 ? wait / train_time : 0;
}

}  // namespace

int Runner::epochs_to_run() const {
  if (e_.run.max_steps <= 0) return e_.run.epochs;
  const int64_t per_epoch = std::max<int64_t>(train_->batches(), 1);
  return static_cast<int>(std::min<int64_t>(e_.run.epochs, (e_.run.max_steps + per_epoch - 1) / per_epoch));
}

bool Runner::run_epochs(RunRecord& record, RunSummary& summary, TrainingProgress& progress, bool& diverged) {
  const bool writer = e_.executor->world().writes_records();
  if (e_.scheme->span() == Span::Run) {
    std::vector<EpochMetrics> trained = train_flushless(record, progress.global_step, diverged);
    for (EpochMetrics& m : trained) {
      load_flushless_snapshot(record, m.epoch);
      evaluate(m);
      m.seconds = m.train_seconds + m.eval_seconds;
      finish_epoch(record, summary, progress, m, false);
    }
    return true;
  }
  int session_epochs = 0;
  for (int epoch = progress.epochs_done; epoch < epochs_to_run() && !diverged; ++epoch) {
    if (options_.stop_after > 0 && session_epochs++ == options_.stop_after) {
      summary.status = "stopped";
      if (!options_.quiet) std::cout << fmt::format("stopped after epoch {}; continue with --resume\n", epoch);
      return false;
    }
    const auto epoch_start = std::chrono::steady_clock::now();
    EpochMetrics m = train_epoch(epoch, record, progress.global_step, diverged);
    evaluate(m);
    m.seconds = seconds_since(epoch_start);
    // The traced (last) epoch's files go before the state that counts the epoch as done,
    // so a failed write or a kill here is redone by --resume, which retrains that epoch.
    if (epoch + 1 == epochs_to_run()) write_trace(record, writer);
    finish_epoch(record, summary, progress, m, !diverged);
  }
  return true;
}

RunSummary Runner::run() {
  // Several processes: the one that writes the records uses run.output; the others log
  // to run.output/ranks/<name>/ and print nothing.
  const std::string process = e_.executor->world().process_name();
  const bool writer = e_.executor->world().writes_records();
  if (!writer) options_.quiet = true;
  RunRecord record = writer ? RunRecord(e_.run.output) : RunRecord::log_only(e_.run.output + "/ranks/" + process);
  RunSummary summary;
  summary.dir = e_.run.output;
  if (e_.run.checkpoint_format == RunOptions::CheckpointFormat::Safetensors) {
    summary.final_weights = "checkpoints/final.safetensors";
  }
  // The writer knows; every process must stop with it.
  if (options_.resume && e_.executor->world().any(writer && RunRecord::finished(record.dir()))) {
    summary.status = "already finished";
    if (!options_.quiet) std::cout << record.dir() << " already holds a finished run; nothing to resume.\n";
    return summary;
  }
  TrainingProgress progress;
  const bool flushless = e_.scheme->span() == Span::Run;
  open_record(record, progress, flushless);
  announce(record, options_.quiet,
           fmt::format("threads: {}{}; {} stage{} on {}", e_.executor->thread_layout(device_count()),
                       e_.run.threads > 0 ? "" : " (run.threads 0: OMP_NUM_THREADS, else half the cores)",
                       stage_count(), stage_count() == 1 ? "" : "s", fmt::join(e_.run.devices, ", ")));
  if (!init_report_.empty()) announce(record, options_.quiet, init_report_);
  if (!limits_report_.empty()) announce(record, options_.quiet, limits_report_);
  for (const auto& s : stages_) summary.parameters += count_parameters(s->module());
  add_history(summary, progress.history);
  const auto start = std::chrono::steady_clock::now();
  bool diverged = false;
  if (!run_epochs(record, summary, progress, diverged)) return summary;
  if (diverged) summary.status = "diverged";
  save_checkpoint(record, "final");
  if (flushless) write_trace(record, writer);
  close_run(record, summary, seconds_since(start));
  return summary;
}

void Runner::open_record(RunRecord& record, TrainingProgress& progress, bool flushless) {
  // A flushless run has no epoch boundary to resume from: it restarts. Otherwise each
  // process restores its own stages, from the newest epoch all of them hold.
  if (options_.resume && !flushless && agree_resume_epoch(e_.executor->world(), record.state_path()) > 0) {
    const HeldStages own = own_stages(e_.executor->world(), stages(), policies());
    progress = load_training_state(record.state_path(), own, codecs_.get());
    record.resume(resolved_config(), progress.epochs_done);
    if (!options_.quiet) std::cout << fmt::format("resuming {} after epoch {}\n", record.dir(), progress.epochs_done);
  } else {
    record.begin(resolved_config(), options_.overwrite || options_.resume);
  }
}

void Runner::close_run(RunRecord& record, RunSummary& summary, double seconds) {
  const bool writer = e_.executor->world().writes_records();
  // The trace records the last epoch's actions, written before that epoch counts as done;
  // a folder whose every epoch is done but whose trace is gone (deleted, or left by an older
  // pipelab) cannot replay that epoch, so the summary says so instead of staying silent.
  if (e_.run.trace && writer && !std::filesystem::exists(std::filesystem::path(record.dir()) / "trace.json")) {
    summary.trace_missing =
        "the last epoch finished in an earlier session and its trace.json is gone (a resumed run cannot replay "
        "that epoch); run again with --overwrite for a trace";
  }
  summary.seconds = seconds;
  summary.data_wait_fraction = data_wait_fraction(summary.history);
  if (codecs_) {
    // A collective: every process holds the ends of its own stages.
    for (const std::vector<int64_t>& held : gather_values(e_.executor->world(), {codecs_->storage_bytes()})) {
      summary.codec_storage_bytes += held.empty() ? 0 : held.front();
    }
  }
  finish_summary(summary);
  record.summary(summary_json(e_, summary, stage_count()));
  // --quiet drops the progress and the per-epoch lines, not the result: the summary shows
  // wherever the records are written.
  announce(record, !writer || !options_.summary, format_summary(e_, summary, stage_count()));
}

}  // namespace pipelab
