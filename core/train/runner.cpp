/// The runner: a session's passes through the step loop, evaluation, checkpoints, records.
#include "core/train/runner.h"

#include <chrono>
#include <iostream>

#include <fmt/ranges.h>

#include "core/train/run_config.h"
#include "core/train/step_loop.h"
#include "core/util/clock.h"

namespace pipelab {

/// One session of a run: its recorder, checkpoints and step loop, and where it stands.
struct RunSession {
  RunSession(Experiment& e, RunParts& parts, const RunnerOptions& options)
      : recorder(e, parts, options.quiet, options.summary),
        checkpoints(e, parts, recorder.record()),
        loop(e, parts, recorder, checkpoints, recorder.quiet(), options.clock) {}
  RunRecorder recorder;
  RunCheckpoints checkpoints;
  StepLoop loop;
  TrainingProgress progress;
  RunSummary summary;
  bool diverged = false;
};

Runner::Runner(Experiment& experiment, RunnerOptions options)
    : e_(experiment), options_(options), parts_(RunBuilder(experiment, options.resume).build()) {}

Runner::~Runner() = default;

YAML::Node Runner::resolved_config() const { return pipelab::resolved_config(e_, *parts_); }

namespace {

/// Adds one epoch to the summary (best accuracy first seen).
void add_epoch(RunSummary& summary, const EpochMetrics& m) {
  if (summary.history.empty() || m.test_acc > summary.best_test_acc) {
    summary.best_test_acc = m.test_acc;
    summary.best_epoch = m.epoch;
  }
  summary.history.push_back(m);
}

}  // namespace

RunSummary Runner::run() {
  RunSession session(e_, *parts_, options_);
  RunRecorder& recorder = session.recorder;
  RunSummary& summary = session.summary;
  summary.dir = e_.run.output;
  summary.clock = options_.clock;
  if (e_.run.checkpoint_format == RunOptions::CheckpointFormat::Safetensors) {
    summary.final_weights = "checkpoints/final.safetensors";
  }
  // The writer knows; every process must stop with it.
  const std::string dir = recorder.record().dir();
  if (options_.resume && e_.executor->world().any(recorder.writer() && RunRecord::finished(dir))) {
    summary.status = "already finished";
    if (!recorder.quiet()) std::cout << dir << " already holds a finished run; nothing to resume.\n";
    return summary;
  }
  session.progress = session.checkpoints.open(resolved_config(), options_.resume, options_.overwrite, recorder.quiet());
  const int stages = parts_->stage_count();
  recorder.announce(fmt::format("threads: {}{}; {} stage{} on {}", e_.executor->thread_layout(device_count()),
                                e_.run.threads > 0 ? "" : " (run.threads 0: OMP_NUM_THREADS, else half the cores)",
                                stages, stages == 1 ? "" : "s", fmt::join(e_.run.devices, ", ")));
  if (!parts_->init_report.empty()) recorder.announce(parts_->init_report);
  if (!parts_->limits_report.empty()) recorder.announce(parts_->limits_report);
  // Ragged text: how the documents were cut and batched (pieces, rows, padding) frames its figures.
  if (parts_->data.spec.documents) recorder.announce("data: " + parts_->data.description);
  if (options_.clock.on()) {
    recorder.announce(
        fmt::format("simulated on {}: {:.4g} ms a step (steps.csv's simulated_time, epochs.csv's "
                    "simulated_seconds)",
                    options_.clock.cluster, options_.clock.step_seconds * 1e3));
  }
  for (const auto& s : parts_->stages) summary.parameters += count_parameters(s->module());
  // The summary's total is the whole run's: a resumed run adds the epochs of the sessions
  // before it to this one's time.
  double earlier_seconds = 0;
  for (const EpochMetrics& m : session.progress.history) {
    add_epoch(summary, m);
    earlier_seconds += m.seconds;
  }
  const auto start = std::chrono::steady_clock::now();
  if (!train_epochs(session)) return summary;
  if (session.diverged) summary.status = "diverged";
  session.checkpoints.save_weights("final");
  recorder.close(summary, earlier_seconds + seconds_since(start), session.loop.measured());
  return summary;
}

bool Runner::train_epochs(RunSession& session) {
  StepLoop& loop = session.loop;
  const int epochs = loop.epochs_to_run();
  int session_epochs = 0;
  for (int epoch = session.progress.epochs_done; epoch < epochs && !session.diverged;) {
    if (options_.stop_after > 0 && session_epochs == options_.stop_after) {
      session.summary.status = "stopped";
      if (!session.recorder.quiet()) {
        std::cout << fmt::format("stopped after epoch {}; continue with --resume\n", epoch);
      }
      return false;
    }
    const int pass = parts_->plan.epochs_per_pass(epochs - epoch);
    std::vector<EpochMetrics> trained = loop.train(epoch, pass, session.progress.global_step, session.diverged);
    // The traced (last) pass's files go before the state that counts its epochs as done, so a
    // failed write or a kill here is redone by --resume, which retrains that pass.
    if (epoch + pass == epochs) session.recorder.write_trace(loop.measured());
    finish_pass(session, epoch, std::move(trained));
    epoch += pass;
    session_epochs += pass;
  }
  return true;
}

void Runner::finish_pass(RunSession& session, int first, std::vector<EpochMetrics> trained) {
  const bool several = trained.size() > 1;
  for (EpochMetrics& m : trained) {
    // A pass of several epochs evaluates each on the weights it ended with.
    if (several) session.checkpoints.load_epoch(m.epoch - first, m.epoch == trained.back().epoch);
    session.loop.evaluate(m);
    m.seconds = m.train_seconds + m.eval_seconds;
    // Such a pass cannot resume from inside: only a one-epoch pass saves the state.
    finish_epoch(session, m, !several && !session.diverged);
  }
}

void Runner::finish_epoch(RunSession& session, const EpochMetrics& m, bool save_state) {
  session.recorder.epoch(m);
  add_epoch(session.summary, m);
  session.progress.history.push_back(m);
  session.progress.epochs_done = m.epoch;
  if (e_.run.checkpoint_every > 0 && m.epoch % e_.run.checkpoint_every == 0) {
    session.checkpoints.save_weights(fmt::format("epoch_{}", m.epoch));
  }
  if (save_state) session.checkpoints.save_state(session.progress);
}

}  // namespace pipelab
