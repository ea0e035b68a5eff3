/// The end-of-run summary, for people (stdout, log.txt) and for tools (summary.json).
#include <fmt/format.h>

#include "core/io/json.h"
#include "core/train/runner.h"
#include "core/util/progress.h"
#include "core/util/provenance.h"

namespace pipelab {

std::string format_summary(const Experiment& e, const RunSummary& s, int stages) {
  std::string out = fmt::format("\n{} — {} on {} stage{}, model {} ({:.3g}M parameters), dataset {}\n", e.name,
                                e.scheme->type(), stages, stages == 1 ? "" : "s", e.model->type(),
                                static_cast<double>(s.parameters) / 1e6, e.dataset->type());
  if (s.history.empty()) return out + "  no epoch finished\n";
  const EpochMetrics& last = s.history.back();
  if (s.status == "diverged") {
    out += fmt::format("  DIVERGED in epoch {}: the training loss became NaN or infinite\n", last.epoch);
  }
  out += fmt::format("  test accuracy   {:.2f}% final, {:.2f}% best (epoch {})\n", last.test_acc, s.best_test_acc,
                     s.best_epoch);
  out += fmt::format("  test loss       {:.4f}   train loss {:.4f}   train accuracy {:.2f}%\n", last.test_loss,
                     last.train_loss, last.train_acc);
  out += fmt::format("  throughput      {:.0f} samples/s training (this machine), data wait {:.1f}%, total {}\n",
                     s.samples_per_second, 100 * s.data_wait_fraction, format_duration(s.seconds));
  if (stages > 1) {
    out += fmt::format(
        "  pipeline        bubble {:.1f}% with this schedule's measured stage times ({:.1f}% with equal times);\n"
        "                  one device per stage would train ~{:.0f} samples/s\n",
        100 * s.bubble_measured, 100 * s.bubble_ideal, s.simulated_samples_per_second);
    out += fmt::format("  traffic         {:.3g} MB forward, {:.3g} MB backward per step across stage boundaries\n",
                       last.bytes_forward_per_step / 1e6, last.bytes_backward_per_step / 1e6);
  }
  out += fmt::format("  results         {}/ (summary.json, metrics/, checkpoints/final.pt)\n", s.dir);
  return out;
}

namespace {

/// {"final": ..., "best": ..., "best_epoch": ...} of one per-epoch metric.
std::string metric_json(const RunSummary& s, double EpochMetrics::*field, bool higher_is_better) {
  double best = s.history.front().*field;
  int best_epoch = s.history.front().epoch;
  for (const EpochMetrics& m : s.history) {
    const double v = m.*field;
    if (higher_is_better ? v > best : v < best) {
      best = v;
      best_epoch = m.epoch;
    }
  }
  return json::Object()
      .add("final", s.history.back().*field)
      .add("best", best)
      .add("best_epoch", best_epoch)
      .str();
}

}  // namespace

std::string summary_json(const Experiment& e, const RunSummary& s, int stages) {
  json::Object o;
  o.add("status", s.status)
      .add("experiment", e.name)
      .add("scheme", e.scheme->type())
      .add("stages", stages)
      .add("model", e.model->type())
      .add("dataset", e.dataset->type())
      .add("optimizer", e.optimizer->type())
      .add("seed", e.run.seed)
      .add("epochs", static_cast<int64_t>(s.history.size()))
      .add("parameters", s.parameters);
  if (!s.history.empty()) {
    o.add_raw("test_acc", metric_json(s, &EpochMetrics::test_acc, true))
        .add_raw("test_loss", metric_json(s, &EpochMetrics::test_loss, false))
        .add_raw("train_acc", metric_json(s, &EpochMetrics::train_acc, true))
        .add_raw("train_loss", metric_json(s, &EpochMetrics::train_loss, false));
  }
  o.add("seconds", s.seconds)
      .add("samples_per_second", s.samples_per_second)
      .add("data_wait_fraction", s.data_wait_fraction)
      .add("bubble_fraction_ideal", s.bubble_ideal)
      .add("bubble_fraction_measured", s.bubble_measured)
      .add("simulated_samples_per_second", s.simulated_samples_per_second)
      .add("git_revision", git_revision());
  return o.pretty();
}

}  // namespace pipelab
