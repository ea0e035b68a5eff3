/// The run's records, its epoch lines and its summary (core/run/run_recorder.h).
#include "core/run/run_recorder.h"

#include <filesystem>
#include <iostream>

#include "core/assembly/run_parts.h"
#include "core/util/progress.h"

namespace pipelab {
namespace {

/// This process's records: the run's folder for the writer, ranks/<name>/ for the others.
RunRecord open_record(const Experiment& e) {
  World& world = e.executor->world();
  return world.writes_records() ? RunRecord(e.run.output)
                                : RunRecord::log_only(e.run.output + "/ranks/" + world.process_name());
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

RunRecorder::RunRecorder(const Experiment& experiment, const RunParts& parts, bool quiet, bool print_summary)
    // Only the writer prints: the other processes log to their own folders.
    : e_(experiment), parts_(parts), quiet_(quiet || !experiment.executor->world().writes_records()),
      print_summary_(print_summary), record_(open_record(experiment)) {}

bool RunRecorder::writer() const { return e_.executor->world().writes_records(); }

void RunRecorder::announce(const std::string& text, bool quiet) {
  for (size_t p = 0, q; p < text.size(); p = q + 1) {
    q = text.find('\n', p);
    if (q == std::string::npos) q = text.size();
    record_.log(text.substr(p, q - p));
  }
  if (!quiet) std::cout << text << (text.empty() || text.back() != '\n' ? "\n" : "") << std::flush;
}

void RunRecorder::epoch(const EpochMetrics& m) {
  gather_stage_metrics();
  record_.epoch(m);
  // Only the process that writes the records sees the losses (the others relay theirs to
  // it): a rank's own log says so rather than show zeros that look measured.
  const std::string line =
      writer() ? fmt::format("epoch {:>3}  train loss {:.4f}  acc {:6.2f}%  |  test loss {:.4f}  acc {:6.2f}%  |  lr {:.3g}  {}",
                             m.epoch, m.train_loss, m.train_acc, m.test_loss, m.test_acc, m.lr,
                             format_duration(m.seconds))
               : fmt::format("epoch {:>3}  done in {} (losses and accuracy: the writing process's log)", m.epoch,
                             format_duration(m.seconds));
  record_.log(line);
  if (!quiet_) std::cout << line << std::endl;
}

void RunRecorder::close(RunSummary& summary, double seconds, const PassMeasurements& measured) {
  // The trace records the last epoch's actions, written before that epoch counts as done;
  // a folder whose every epoch is done but whose trace is gone (deleted, or left by an older
  // pipelab) cannot replay that epoch, so the summary says so instead of staying silent.
  if (e_.run.trace && writer() && !std::filesystem::exists(std::filesystem::path(record_.dir()) / "trace.json")) {
    summary.trace_missing =
        "the last epoch finished in an earlier session and its trace.json is gone (a resumed run cannot replay "
        "that epoch); run again with --overwrite for a trace";
  }
  summary.seconds = seconds;
  summary.data_wait_fraction = data_wait_fraction(summary.history);
  if (parts_.codecs) {
    // A collective: every process holds the ends of its own stages.
    for (const std::vector<int64_t>& held : gather_values(e_.executor->world(), {parts_.codecs->storage_bytes()})) {
      summary.codec_storage_bytes += held.empty() ? 0 : held.front();
    }
  }
  finish_summary(summary, measured);
  record_.summary(summary_json(e_, summary));
  // --quiet drops the progress and the per-epoch lines, not the result: the summary shows
  // wherever the records are written.
  announce(format_summary(e_, summary), !writer() || !print_summary_);
}

}  // namespace pipelab
