/// The runner: a session's passes through the step loop, evaluation, checkpoints, records.
#include "core/run/runner.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <tuple>

#include <fmt/ranges.h>

#include "core/assembly/run_config.h"
#include "core/feed/batch_dump.h"
#include "core/io/safetensors.h"
#include "core/plan/topology.h"
#include "core/records/state_dict.h"
#include "core/run/step_loop.h"
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

/// The clock the run's steps are timed by: the one it started with, on --resume. A session
/// that asks for another (other cost flags, or flags where the run had none) would add times
/// of two clocks in steps.csv and time_to_target: refused. Without flags a resumed run keeps
/// its own clock.
SimulatedClock one_clock(const TrainingProgress& progress, const SimulatedClock& asked) {
  if (progress.epochs_done == 0) return asked;
  const bool had = !progress.clock.empty();
  if (!had && !asked.on()) return asked;
  const std::string earlier = fmt::format("the run's first {} epoch{} {}", progress.epochs_done,
                                          progress.epochs_done == 1 ? " was" : "s were",
                                          had ? fmt::format("timed on {}{}", progress.clock,
                                                            progress.clock_step_seconds > 0
                                                                ? fmt::format(" ({:.4g} ms a step)", progress.clock_step_seconds * 1e3)
                                                                : "")
                                              : "not timed on a simulated cluster");
  if (had && !asked.on()) {
    if (progress.clock_step_seconds <= 0) {
      throw UserError(fmt::format("--resume: {}, and this state does not record its step. Fix: resume with the cost "
                                  "flags the run started with",
                                  earlier));
    }
    SimulatedClock kept;
    kept.cluster = progress.clock;
    kept.step_seconds = progress.clock_step_seconds;
    return kept;  // the devices count is the plan's, unchanged by a resume
  }
  // The same devices at the same step; devices timed here (--time-blocks) time a step anew each
  // session, and keep the first session's.
  const bool timed_here = asked.cluster.rfind("devices timed here", 0) == 0;
  const bool same = had && progress.clock == asked.cluster &&
                    (timed_here || progress.clock_step_seconds <= 0 ||
                     std::abs(asked.step_seconds - progress.clock_step_seconds) <= 1e-9 * progress.clock_step_seconds);
  if (same) {
    SimulatedClock kept = asked;
    if (progress.clock_step_seconds > 0) kept.step_seconds = progress.clock_step_seconds;  // timed blocks vary
    return kept;
  }
  throw UserError(fmt::format("--resume: {}, and this session would time the rest on {} ({:.4g} ms a step): one run "
                              "keeps one clock (steps.csv's simulated_time and time_to_target add the steps up). Fix: "
                              "resume with the cost flags the run started with{}, or start it again with --overwrite",
                              earlier, asked.cluster, asked.step_seconds * 1e3,
                              had ? "" : " (none)"));
}

}  // namespace

Evaluation Runner::evaluate(const std::string& path, bool train_split) {
  const TensorDict state = load_weights(path);
  for (int r = 0; r < parts_->plan.copies(); ++r) load_model_state(parts_->replica_stages(r), state, true, path);
  std::unique_ptr<DataLoader> train;
  DataLoader* loader = parts_->test.get();
  if (train_split) {
    LoaderOptions o{e_.run.eval_batch_size.value_or(e_.run.batch_size), false, false, 0, e_.run.loader};
    o.across_epochs = false;
    train = std::make_unique<DataLoader>(parts_->data.train, o);
    loader = train.get();
  }
  Schedule schedule;
  return evaluate_model(e_, *parts_, *loader, schedule);
}

RunSummary Runner::run() {
  RunSession session(e_, *parts_, options_);
  RunRecorder& recorder = session.recorder;
  RunSummary& summary = session.summary;
  summary.dir = e_.run.output;
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
  options_.clock = one_clock(session.progress, options_.clock);
  if (options_.clock.on() && options_.clock.devices == 0) options_.clock.devices = parts_->plan.devices();
  session.progress.clock = options_.clock.on() ? options_.clock.cluster : "";
  session.progress.clock_step_seconds = options_.clock.step_seconds;
  session.loop.set_clock(options_.clock);
  summary.clock = options_.clock;
  recorder.announce(fmt::format("threads: {}{}; {} on {}", e_.executor->thread_layout(device_count()),
                                e_.run.threads > 0 ? "" : " (run.threads 0: OMP_NUM_THREADS, else half the cores)",
                                topology_of(parts_->plan).text(), fmt::join(e_.run.devices, ", ")));
  if (!parts_->init_report.empty()) recorder.announce(parts_->init_report);
  if (!parts_->limits_report.empty()) recorder.announce(parts_->limits_report);
  // Ragged text: how the documents were cut and batched (pieces, rows, padding) frames its figures.
  if (parts_->data.spec.documents) recorder.announce("data: " + parts_->data.description);
  if (options_.clock.on()) {
    recorder.announce(
        fmt::format("simulated on {}: {:.4g} ms a step (steps.csv's simulated_time, epochs.csv's "
                    "simulated_seconds)",
                    options_.clock.cluster, options_.clock.step_seconds * 1e3));
    if (!options_.clock.checked.empty()) {
      recorder.announce(fmt::format("simulated costs {}, {}", options_.clock.costs, options_.clock.checked));
    }
    if (!options_.clock.warning.empty()) recorder.announce("warning: " + options_.clock.warning);
  }
  std::tie(summary.parameters, summary.resident_parameters) = parts_->parameter_counts();
  summary.topology = topology_of(parts_->plan);
  // The summary's total is the whole run's: a resumed run adds the epochs of the sessions
  // before it to this one's time.
  double earlier_seconds = 0;
  for (const EpochMetrics& m : session.progress.history) {
    add_epoch(summary, m);
    earlier_seconds += m.seconds;
  }
  BatchDump dump(dir + "/batches.safetensors", options_.dump_batches);
  if (dump.on()) session.loop.set_dump(&dump);
  const auto start = std::chrono::steady_clock::now();
  const bool finished = train_epochs(session);
  if (dump.on() && recorder.writer()) {
    dump.write();
    recorder.announce(fmt::format("wrote {}: the micro-batches of the first {} steps as the stages read them",
                                  dump.path(), options_.dump_batches));
  }
  if (!finished) return summary;
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
