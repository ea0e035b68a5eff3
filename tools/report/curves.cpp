#include "tools/report/curves.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "core/io/input_file.h"
#include "core/util/error.h"
#include "core/util/names.h"
#include "tools/report/csv.h"
#include "tools/report/stats.h"
#include "tools/sweep/key_paths.h"

namespace fs = std::filesystem;

namespace pipelab::tools {
namespace {

/// One run's curve: per finished epoch (or step, with --x step), x and the metric (NaN where
/// the file says null).
struct Curve {
  std::vector<int64_t> epoch;  ///< the epoch, or the step: what a group's mean is taken over
  std::vector<double> x, y;
};

bool by_step(const CurveOptions& o) { return o.x == "step"; }

/// The epochs.csv column --x sums (cumulative time), or "" for epoch and step.
std::string summed_column(const CurveOptions& o) {
  return o.x == "time" ? "seconds" : o.x == "simulated_time" ? "simulated_seconds" : "";
}

/// The column of the file `options` reads: steps.csv calls the training loss `loss`.
std::string metric_column(const CurveOptions& o) {
  return by_step(o) && o.metric == "train_loss" ? "loss" : o.metric;
}

/// A CSV field as a number; NaN for `null` (a non-finite value, see core/io/json.h).
double cell_number(const std::string& text) {
  return parse_number(text).value_or(std::numeric_limits<double>::quiet_NaN());
}

size_t column(const std::vector<std::string>& header, const std::string& name, const std::string& option,
              const std::string& file) {
  const auto it = std::find(header.begin(), header.end(), name);
  if (it != header.end()) return static_cast<size_t>(it - header.begin());
  throw UserError(
      fmt::format("{} {}: {} has no such column. Fix: use one of: {}.", option, name, file,
                  join(closest_first(name, std::vector<std::string>(header.begin() + 1, header.end())), ", ")));
}

/// Reads a run's epochs.csv (steps.csv with --x step); an empty curve when the run has no
/// finished epoch (step) yet. A file that cannot be used sets `problem` (the run is then left
/// out, and named).
Curve load_curve(const RunInfo& run, const CurveOptions& options, std::string& problem) {
  const fs::path path = fs::path(run.dir) / "metrics" / (by_step(options) ? "steps.csv" : "epochs.csv");
  Curve c;
  if (!input_exists(path.string())) return c;
  std::vector<std::vector<std::string>> rows;
  try {
    rows = parse_csv(read_file(path.string()), path.string());
  } catch (const UserError& e) {
    problem = e.what();
    return c;
  }
  if (rows.size() < 2) return c;
  const size_t y = column(rows[0], metric_column(options), "--metric", path.string());
  const size_t e = column(rows[0], by_step(options) ? "step" : "epoch", "--x", path.string());
  const std::string summed = summed_column(options);
  const size_t seconds = summed.empty() ? 0 : column(rows[0], summed, "--x " + options.x, path.string());
  double elapsed = 0;
  for (size_t r = 1; r < rows.size(); ++r) {
    const double epoch = e < rows[r].size() ? cell_number(rows[r][e]) : std::nan("");
    if (rows[r].size() != rows[0].size() || !std::isfinite(epoch)) {
      problem = fmt::format("{}: row {} {}", path.string(), r + 1,
                            rows[r].size() != rows[0].size()
                                ? fmt::format("has {} fields, the header {}", rows[r].size(), rows[0].size())
                                : "has no epoch (step) number");
      return {};
    }
    // A value pipelab wrote is a number or null (NaN, infinity: core/io/json.h); anything
    // else means the file is not what pipelab wrote, and its curve would be a guess.
    const std::string& cell = rows[r][y];
    if (!parse_number(cell) && cell != "null" && !cell.empty()) {
      problem = fmt::format("{}: row {}: {} '{}' is not a number", path.string(), r + 1,
                            metric_column(options), cell.substr(0, 40));
      return {};
    }
    if (!summed.empty() && !std::isfinite(cell_number(rows[r][seconds]))) {
      problem = fmt::format("{}: row {} has no {}{}", path.string(), r + 1, summed,
                            options.x == "simulated_time" ? " (the run had no --cluster: rerun it with `pipelab run "
                                                            "FILE --cluster NAME --overwrite`)"
                                                          : "");
      return {};
    }
    c.epoch.push_back(static_cast<int64_t>(epoch));
    elapsed += summed.empty() ? 0 : cell_number(rows[r][seconds]);
    c.x.push_back(summed.empty() ? epoch : elapsed);
    c.y.push_back(cell_number(cell));
  }
  return c;
}

/// The mean curve of a group (x and y averaged per epoch over the runs that reached it).
Series mean_series(const std::string& label, const std::vector<const Curve*>& curves, bool band) {
  std::map<int64_t, std::vector<double>> xs, ys;
  for (const Curve* c : curves) {
    for (size_t i = 0; i < c->epoch.size(); ++i) {
      if (!std::isfinite(c->y[i])) continue;
      xs[c->epoch[i]].push_back(c->x[i]);
      ys[c->epoch[i]].push_back(c->y[i]);
    }
  }
  Series s;
  s.label = fmt::format("{} (n={})", label, curves.size());
  for (const auto& [epoch, values] : ys) {
    const Stats st = describe(values);
    s.x.push_back(describe(xs[epoch]).mean);
    s.y.push_back(st.mean);
    if (band) {
      s.lo.push_back(st.min);
      s.hi.push_back(st.max);
    }
  }
  return s;
}

/// The targets the runs were set for this metric (run.targets; steps.csv's `loss` is the
/// training loss): a line each, where a time to accuracy is read off the chart.
void add_targets(LineChart& chart, const std::vector<RunInfo>& runs, const CurveOptions& options) {
  const std::string metric = options.metric == "loss" ? "train_loss" : options.metric;
  std::set<double> values;
  for (const RunInfo& run : runs) {
    const YAML::Node run_section = run.config.IsMap() ? run.config["run"] : YAML::Node();
    const YAML::Node targets = run_section && run_section.IsMap() ? run_section["targets"] : YAML::Node();
    const YAML::Node value = targets && targets.IsMap() ? targets[metric] : YAML::Node();
    if (!value || !value.IsScalar()) continue;
    try {
      values.insert(value.as<double>());
    } catch (const YAML::Exception&) {
      // null: no target for this metric
    }
  }
  for (const double v : values) chart.references.push_back({fmt::format("target {} = {:g} (run.targets)", metric, v), v});
}

}  // namespace

std::string metric_label(const std::string& metric) {
  static const std::map<std::string, std::string> labels{
      {"test_acc", "test accuracy (%)"},
      {"train_acc", "training accuracy (%)"},
      {"test_mcc", "test Matthews correlation (x 100)"},
      {"test_loss", "test loss"},
      {"train_loss", "training loss"},
      {"loss", "training loss"},
      {"lr", "learning rate"},
      {"seconds", "epoch time (s)"},
      {"train_seconds", "training time per epoch (s)"},
      {"eval_seconds", "evaluation time per epoch (s)"},
      {"samples_per_second", "training throughput (samples/s)"},
      {"data_wait_fraction", "data wait (share of the epoch)"},
      {"bytes_forward_per_step", "bytes sent forward per step"},
      {"bytes_backward_per_step", "bytes sent backward per step"},
      {"simulated_seconds", "training time per epoch on the simulated cluster (s)"},
      {"simulated_time", "training time on the simulated cluster (s)"}};
  const auto it = labels.find(metric);
  return it == labels.end() ? metric : it->second;
}

LineChart build_curves(const std::vector<RunInfo>& runs, const CurveOptions& options) {
  if (options.x != "epoch" && options.x != "time" && options.x != "step" && options.x != "simulated_time") {
    throw UserError(
        fmt::format("--x {}: expected epoch, time, simulated_time or step. Fix: use --x epoch, --x time, "
                    "--x simulated_time or --x step.",
                    options.x));
  }
  for (const std::string& k : options.group_by) require_config_key(runs, k, "--group-by");
  LineChart chart;
  chart.x_label = options.x == "time"             ? "training and evaluation time (s)"
                  : options.x == "simulated_time" ? "training time on the simulated cluster (s)"
                  : by_step(options)              ? "training step"
                                                  : "epoch";
  chart.y_label = metric_label(options.metric);
  chart.integer_x = summed_column(options).empty();
  chart.title = fmt::format("{} by {}", chart.y_label, options.x);
  if (!options.baseline.empty()) {
    const auto it = std::find_if(runs.begin(), runs.end(), [&](const RunInfo& r) {
      return r.name == options.baseline || r.dir == options.baseline || fs::path(r.dir).filename() == options.baseline;
    });
    if (it == runs.end()) {
      std::vector<std::string> names;
      for (const RunInfo& r : runs) names.push_back(r.name);
      throw UserError(fmt::format("--baseline {}: no such run here. Fix: use one of: {}.", options.baseline,
                                  join(closest_first(options.baseline, names), ", ")));
    }
    std::string problem;
    const Curve c = load_curve(*it, options, problem);
    if (!problem.empty()) throw UserError(fmt::format("--baseline {}: {}", options.baseline, problem));
    const auto last = std::find_if(c.y.rbegin(), c.y.rend(), [](double v) { return std::isfinite(v); });
    if (last == c.y.rend()) {
      throw UserError(fmt::format("--baseline {}: the run has no finished epoch with a finite {} yet.", options.baseline,
                                  options.metric));
    }
    chart.references.push_back({fmt::format("baseline {}: {:.4g} (last epoch)", options.baseline, *last), *last});
  }
  add_targets(chart, runs, options);
  std::vector<std::pair<const RunInfo*, Curve>> curves;
  for (const RunInfo& run : runs) {
    std::string problem;
    Curve c = load_curve(run, options, problem);
    if (!problem.empty()) {
      chart.notes.push_back(fmt::format("left out {}: {}", run.name, problem));
    } else if (!c.x.empty()) {
      // Points that are not finite (a diverged run's nulls, an infinity) are gaps: say so.
      const auto finite = std::count_if(c.y.begin(), c.y.end(), [](double v) { return std::isfinite(v); });
      if (finite < static_cast<std::ptrdiff_t>(c.y.size())) {
        chart.notes.push_back(fmt::format("{}: {} of {} values of {} are not finite (NaN or infinite: the run "
                                          "diverged?) and are not drawn",
                                          run.name, c.y.size() - static_cast<size_t>(finite), c.y.size(),
                                          metric_column(options)));
      }
      curves.emplace_back(&run, std::move(c));
    } else {
      chart.notes.push_back(fmt::format("left out {}: no finished {} in metrics/{}.csv yet", run.name,
                                        by_step(options) ? "step" : "epoch", by_step(options) ? "steps" : "epochs"));
    }
  }
  if (curves.empty()) {
    throw UserError(fmt::format("no run has a finished epoch (metrics/epochs.csv) to plot{}. Fix: plot a folder of "
                                "runs that have trained at least one epoch.",
                                chart.notes.empty() ? "" : ":\n  " + join(chart.notes, "\n  ")));
  }
  if (options.group_by.empty() && !options.band) {
    for (const auto& [run, c] : curves) {
      const std::string name = run->name == "." ? fs::path(run->dir).filename().string() : run->name;
      chart.series.push_back({name, c.x, c.y, {}, {}});
    }
    return chart;
  }
  chart.title += options.group_by.empty()
                     ? fmt::format(", mean of all {} runs{}", curves.size(), options.band ? " (band: min to max)" : "")
                     : fmt::format(", mean of the runs by {}{}", join(options.group_by, " / "),
                                   options.band ? " (band: min to max)" : "");
  std::vector<std::string> labels;
  std::map<std::string, std::vector<const Curve*>> groups;
  for (const auto& [run, c] : curves) {
    // Legend entries name their keys: "stages=4, scheme=gpipe". A key the run's config does
    // not have is left out (a sweep's cell without a section the others set), and a run with
    // none of them is "(not set)".
    std::vector<std::string> parts;
    for (const std::string& k : options.group_by) {
      if (const auto v = config_text(*run, k)) parts.push_back(k + "=" + *v);
    }
    const std::string label = options.group_by.empty() ? "all runs" : parts.empty() ? "(not set)" : join(parts, ", ");
    if (!groups.count(label)) labels.push_back(label);
    groups[label].push_back(&c);
  }
  std::sort(labels.begin(), labels.end(), natural_less);
  for (const std::string& label : labels) chart.series.push_back(mean_series(label, groups[label], options.band));
  return chart;
}

}  // namespace pipelab::tools
