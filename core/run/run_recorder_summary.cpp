/// The end-of-run summary, for people (stdout, log.txt) and for tools (summary.json).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>

#include "core/assembly/run_parts.h"
#include "core/feed/feeds.h"
#include "core/io/json.h"
#include "core/run/run_recorder.h"
#include "core/schedule/timeline.h"
#include "core/scheme/replicas.h"
#include "core/util/progress.h"
#include "core/util/provenance.h"

namespace pipelab {

void RunRecorder::finish_summary(RunSummary& s, const PassMeasurements& measured) const {
  // Per-stage means of what the policies measured, from metrics/stages.csv (so that a
  // resumed run's summary covers every session).
  s.stage_means.assign(static_cast<size_t>(parts_.stage_count()), {});
  std::map<std::pair<int, std::string>, std::pair<double, int64_t>> sums;
  for_each_stage_metric((std::filesystem::path(e_.run.output) / "metrics/stages.csv").string(),
                        [&](int stage, const std::string& name, double value) {
                          auto& [sum, n] = sums[{stage, name}];
                          sum += value;
                          ++n;
                        });
  for (const auto& [key, total] : sums) {
    if (key.first < parts_.stage_count()) s.stage_means[static_cast<size_t>(key.first)][key.second] = total.first / static_cast<double>(total.second);
  }
  s.loss_scales.clear();
  s.skipped_updates.clear();
  for (const auto& stage : parts_.stages) {
    if (const LossScaler* scaler = stage->loss_scaler()) {
      s.loss_scales.push_back(scaler->scale());
      s.skipped_updates.push_back(scaler->skipped());
    }
  }
  s.targets = time_to_targets(e_.run.targets, s.history);
  if (s.history.empty()) return;
  int64_t samples = 0;
  double seconds = 0;
  for (const EpochMetrics& m : s.history) {
    samples += static_cast<int64_t>(std::llround(m.samples_per_second * m.train_seconds));
    seconds += m.train_seconds;
  }
  s.samples_per_second = seconds > 0 ? static_cast<double>(samples) / seconds : 0;
  // The schedule of one run (one mini-batch, or one epoch) replayed with unit costs and
  // with the per-stage action times measured in the last epoch.
  const int stages = parts_.stage_count();
  const Schedule schedule = parts_.plan.program(parts_.plan.run_units(e_.run.batch_size, parts_.train->batches()));
  s.bubble_ideal = simulate_timeline(schedule, CostModel::uniform(stages, 1, 1)).bubble_fraction;
  const ExecStats& st = measured.stats;
  if (st.stages() != static_cast<size_t>(stages)) return;  // no training ran in this session
  // Steps in the stats: the most updates any stage made (one per mini-batch, or fewer).
  int64_t steps = 1;
  for (const ActionTime& u : st.time[ActionKind::Update]) steps = std::max(steps, u.count);
  for (const ActionKindInfo& k : action_kinds()) {
    int64_t bytes = 0;
    for (const int64_t b : st.bytes[k.kind]) bytes += b;
    if (bytes > 0) s.traffic_per_step.emplace_back(k.kind, static_cast<double>(bytes) / static_cast<double>(steps));
  }
  const auto any_bytes = [](const std::vector<int64_t>& v) { return std::any_of(v.begin(), v.end(), [](int64_t b) { return b > 0; }); };
  if (any_bytes(st.device_peak_bytes)) s.device_peak_bytes = st.device_peak_bytes;
  if (any_bytes(st.host_peak_bytes)) s.host_peak_bytes = st.host_peak_bytes;
  for (size_t p = 0; p < st.stages(); ++p) {
    if (st.time[ActionKind::Offload][p].count > 0 && st.bytes[ActionKind::Offload][p] == 0) {
      s.offloads_moving_nothing.push_back(static_cast<int>(p));
    }
  }
  const Timeline t = simulate_timeline(schedule, st.cost_model());
  s.bubble_measured = t.bubble_fraction;
  const double per_run_samples =
      static_cast<double>(parts_.plan.mini_batches_per_run(parts_.train->batches()) * e_.run.batch_size);
  s.simulated_samples_per_second = t.makespan > 0 ? per_run_samples / t.makespan : 0;
}

namespace {

/// The run's training time on the simulated cluster, over every epoch of every session.
double simulated_training_seconds(const RunSummary& s) {
  double seconds = 0;
  for (const EpochMetrics& m : s.history) seconds += m.simulated_seconds;
  return seconds;
}

/// "  staleness  stage  forward gap  backward gap ..." (means per stage), or "".
std::string stage_table(const RunSummary& s) {
  std::set<std::string> names;
  for (const auto& m : s.stage_means) {
    for (const auto& kv : m) names.insert(kv.first);
  }
  if (names.empty()) return "";
  std::string out = "  per stage       stage";
  // Each column as wide as its label (at least 16), so that long names stay aligned.
  std::vector<size_t> widths;
  for (const std::string& n : names) {
    std::string label = n;
    std::replace(label.begin(), label.end(), '_', ' ');
    widths.push_back(std::max<size_t>(16, label.size()));
    out += fmt::format("  {:>{}}", label, widths.back());
  }
  out += "   (means over all updates)\n";
  for (size_t r = 0; r < s.stage_means.size(); ++r) {
    out += fmt::format("                  {:>4}", r);
    size_t column = 0;
    for (const std::string& n : names) {
      const size_t w = widths[column++];
      const auto it = s.stage_means[r].find(n);
      out += it == s.stage_means[r].end() ? fmt::format("  {:>{}}", "-", w) : fmt::format("  {:>{}.3f}", it->second, w);
    }
    out += "\n";
  }
  if (names.count("forward_gap") || names.count("backward_gap")) {
    // The sign is the question every reader of an asynchronous scheme's table asks.
    out += "  gap: weight versions from the ones a micro-batch's forward (backward) used to the one its update "
           "applies to;\n  0 is synchronous, > 0 stale, < 0 predicted weights ahead of that update\n";
  }
  return out;
}

}  // namespace

std::string format_summary(const Experiment& e, const RunSummary& s) {
  const std::string resident =
      s.resident_parameters == s.parameters
          ? ""
          : fmt::format("; the fullest device holds {:.3g}M", static_cast<double>(s.resident_parameters) / 1e6);
  std::string out = fmt::format("\n{} — {} on {}, model {} ({:.3g}M parameters{}), dataset {}\n", e.name,
                                e.scheme->type(), s.topology.text(), e.model->type(),
                                static_cast<double>(s.parameters) / 1e6, resident, e.dataset->type());
  if (s.history.empty()) return out + "  no epoch finished\n";
  if (!s.trace_missing.empty()) out += fmt::format("  trace           not written: {}\n", s.trace_missing);
  const EpochMetrics& last = s.history.back();
  if (s.status == "diverged") {
    out += fmt::format("  DIVERGED in epoch {}: the training loss became NaN or infinite\n", last.epoch);
  }
  out += fmt::format("  test accuracy   {:.2f}% final, {:.2f}% best (epoch {})\n", last.test_acc, s.best_test_acc,
                     s.best_epoch);
  if (!std::isnan(last.test_mcc)) {
    double best = last.test_mcc;
    for (const EpochMetrics& m : s.history) best = std::max(best, m.test_mcc);
    out += fmt::format("  test MCC        {:.2f} final, {:.2f} best (Matthews correlation x 100)\n", last.test_mcc, best);
  }
  out += fmt::format("  test loss       {:.4f}   train loss {:.4f}   train accuracy {:.2f}%\n", last.test_loss,
                     last.train_loss, last.train_acc);
  // The last epoch is the basis of both the measured and the projected throughput (the
  // projection replays the last epoch's stage times; earlier epochs include warm-up).
  out += fmt::format("  throughput      {:.0f} samples/s training in the last epoch on this machine ({:.0f} over all\n"
                     "                  epochs), data wait {:.1f}%, total {}\n",
                     last.samples_per_second, s.samples_per_second, 100 * s.data_wait_fraction,
                     format_duration(s.seconds));
  // A loader that cannot keep up makes the run's speed the loader's (on a GPU, one worker
  // gathering 224x224 batches: docs/gpu.md, "Sixth session").
  if (last.data_wait_fraction > 0.1) {
    out += fmt::format("  data            the steps waited for their batches {:.0f}% of the last epoch: raise "
                       "run.loader.workers (now {})\n",
                       100 * last.data_wait_fraction, e.run.loader.workers);
  }
  if (s.topology.stages > 1 || s.topology.devices > 1) {
    out += fmt::format(
        "  pipeline        bubble {:.1f}% with the last epoch's stage times ({:.1f}% with equal times); with\n"
        "                  those times and one device per stage: ~{:.0f} samples/s\n",
        100 * s.bubble_measured, 100 * s.bubble_ideal, s.simulated_samples_per_second);
    out += fmt::format("  traffic         {:.3g} MB forward, {:.3g} MB backward per step across stage boundaries\n",
                       last.bytes_forward_per_step / 1e6, last.bytes_backward_per_step / 1e6);
  }
  // Per device, in MB: "12.3 / 4.56".
  const auto megabytes = [](const std::vector<int64_t>& peaks) {
    std::vector<std::string> text;
    for (const int64_t b : peaks) text.push_back(fmt::format("{:.3g}", static_cast<double>(b) / 1e6));
    return fmt::format("{}", fmt::join(text, " / "));
  };
  if (!s.device_peak_bytes.empty()) {
    out += fmt::format("  memory          peak {} MB {} above the weights: activations,\n"
                       "                  temporaries and gradients in the traced epoch (metrics/costs.json)\n",
                       megabytes(s.device_peak_bytes), s.device_peak_bytes.size() == 1 ? "on the device" : "per device");
  }
  if (!s.host_peak_bytes.empty()) {
    out += fmt::format("  host memory     peak {} MB of offloaded activations {} (partition.offload)\n",
                       megabytes(s.host_peak_bytes), s.host_peak_bytes.size() == 1 ? "for the device" : "per device");
  }
  if (!s.offloads_moving_nothing.empty()) {
    out += fmt::format("  warning         partition.offload: the OFFLOADs of stage{} {} moved nothing: every tensor its "
                       "forward\n                  saves is its input, its output or a weight, which stay on the "
                       "device. Offload\n                  stages of several blocks, or list blocks whose "
                       "activations move (partition.offload.blocks)\n",
                       s.offloads_moving_nothing.size() == 1 ? "" : "s", fmt::join(s.offloads_moving_nothing, ", "));
  }
  if (s.codec_storage_bytes > 0) {
    out += fmt::format("  codec state     {:.4g} MB held by the boundary codecs ({})\n",
                       static_cast<double>(s.codec_storage_bytes) / 1e6,
                       "per-example histories, error feedback: docs/compression.md");
  }
  // The messages are on the traffic line; the all-reduces' share gets its own (per kind in
  // summary.json's traffic_per_step).
  for (const auto& [kind, bytes] : s.traffic_per_step) {
    if (kind_info(kind).role == KindRole::Collective) {
      out += fmt::format("  all-reduce      {:.3g} MB of gradients brought to all-reduces per step (every stage's\n"
                         "                  share: replicas' sums, a global clip, tied weights)\n",
                         bytes / 1e6);
    }
  }
  if (e.run.amp != Amp::None) {
    out += fmt::format("  precision       {} autocast, float32 master weights",
                       e.run.amp == Amp::Bf16 ? "bf16" : "fp16");
    if (!s.loss_scales.empty()) {
      out += fmt::format("; loss scale per stage {} ({} updates skipped)",
                         fmt::join(s.loss_scales, " "),
                         std::accumulate(s.skipped_updates.begin(), s.skipped_updates.end(), int64_t{0}));
    }
    out += "\n";
  }
  if (s.clock.on()) {
    const double simulated = simulated_training_seconds(s);
    out += fmt::format("  simulated       {}: {:.4g} ms a step, {:.0f} samples/s, {} of training in all\n",
                       s.clock.cluster, s.clock.step_seconds * 1e3,
                       static_cast<double>(e.run.batch_size) / s.clock.step_seconds, format_duration(simulated));
  }
  for (const TargetReached& t : s.targets)
    out += fmt::format("  time to target  {}\n", describe(t, static_cast<int>(s.history.size())));
  out += stage_table(s);
  out += fmt::format("  results         {}/ (summary.json, metrics/, {})\n", s.dir, s.final_weights);
  return out;
}

namespace {

/// {"final": ..., "best": ..., "best_epoch": ...} of one per-epoch metric.
json::Object metric_json(const RunSummary& s, double EpochMetrics::*field, bool higher_is_better) {
  double best = s.history.front().*field;
  int best_epoch = s.history.front().epoch;
  for (const EpochMetrics& m : s.history) {
    const double v = m.*field;
    if (higher_is_better ? v > best : v < best) {
      best = v;
      best_epoch = m.epoch;
    }
  }
  return json::Object().add("final", s.history.back().*field).add("best", best).add("best_epoch", best_epoch);
}

}  // namespace

std::string summary_json(const Experiment& e, const RunSummary& s) {
  json::Object o;
  o.add("status", s.status)
      .add("experiment", e.name)
      .add("scheme", e.scheme->type())
      .add("stages", s.topology.stages)
      .add("topology", s.topology.json())
      .add("model", e.model->type())
      .add("dataset", e.dataset->type())
      .add("optimizer", e.optimizer->type())
      .add("seed", e.run.seed)
      .add("epochs", static_cast<int64_t>(s.history.size()))
      .add("parameters", s.parameters)
      .add("resident_parameters", s.resident_parameters);
  if (!s.history.empty()) {
    if (!std::isnan(s.history.back().test_mcc)) o.add("test_mcc", metric_json(s, &EpochMetrics::test_mcc, true));
    o.add("test_acc", metric_json(s, &EpochMetrics::test_acc, true))
        .add("test_loss", metric_json(s, &EpochMetrics::test_loss, false))
        .add("train_acc", metric_json(s, &EpochMetrics::train_acc, true))
        .add("train_loss", metric_json(s, &EpochMetrics::train_loss, false))
        // Traffic per step across all stage boundaries (constant over a run's epochs),
        // so that `pipelab table --metric bytes_backward_per_step.final` can compare schemes.
        .add("bytes_forward_per_step", metric_json(s, &EpochMetrics::bytes_forward_per_step, false))
        .add("bytes_backward_per_step", metric_json(s, &EpochMetrics::bytes_backward_per_step, false));
  }
  o.add("seconds", s.seconds)
      .add("samples_per_second", s.samples_per_second)
      .add("samples_per_second_last_epoch", s.history.empty() ? 0.0 : s.history.back().samples_per_second)
      .add("data_wait_fraction", s.data_wait_fraction)
      .add("bubble_fraction_ideal", s.bubble_ideal)
      .add("bubble_fraction_measured", s.bubble_measured)
      .add("simulated_samples_per_second", s.simulated_samples_per_second)
      .add("git_revision", git_revision());
  if (!s.traffic_per_step.empty()) {
    json::Object traffic;
    for (const auto& [kind, bytes] : s.traffic_per_step) traffic.add(Action::kind_name(kind), bytes);
    o.add("traffic_per_step", traffic);
  }
  if (!s.trace_missing.empty()) o.add("trace_missing", s.trace_missing);
  if (s.clock.on()) {
    const double simulated = simulated_training_seconds(s);
    o.add("simulated", json::Object()
                           .add("cluster", s.clock.cluster)
                           .add("costs", s.clock.costs)
                           .add("checked", s.clock.checked)
                           .add("devices", s.clock.devices)
                           .add("step_seconds", s.clock.step_seconds)
                           .add("samples_per_second", static_cast<double>(e.run.batch_size) / s.clock.step_seconds)
                           .add("train_seconds", simulated));
  }
  if (!s.targets.empty()) {
    json::Object targets;
    for (const TargetReached& t : s.targets) {
      targets.add(t.metric, json::Object()
                                .add("target", t.target)
                                .add("status", t.reached ? "reached" : "not reached")
                                .add("epoch", t.epoch)
                                .add("train_seconds", t.train_seconds)
                                .add("simulated_seconds", t.simulated_seconds)
                                .add("interpolated", t.interpolated));
    }
    o.add("time_to_target", targets);
  }
  if (s.codec_storage_bytes > 0) o.add("codec_storage_bytes", s.codec_storage_bytes);
  o.add("amp", e.run.amp == Amp::None ? "none" : e.run.amp == Amp::Bf16 ? "bf16" : "fp16");
  if (!s.loss_scales.empty()) {
    o.add("loss_scale", s.loss_scales).add("skipped_updates", s.skipped_updates);
  }
  // Per stage: the means of what its policy measured ("stages" is the stage count).
  std::vector<json::Object> per_stage;
  for (size_t r = 0; r < s.stage_means.size(); ++r) {
    json::Object st;
    st.add("stage", static_cast<int64_t>(r));
    for (const auto& [name, mean] : s.stage_means[r]) st.add(name, mean);
    per_stage.push_back(st);
  }
  o.add("per_stage", per_stage);
  return o.pretty();
}

}  // namespace pipelab
