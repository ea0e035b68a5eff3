/// Speed-ups over a baseline cell (tools/report/speedup.h).
#include "tools/report/speedup.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "core/util/error.h"
#include "core/util/names.h"
#include "tools/report/stats.h"

namespace pipelab::tools {
namespace {

enum class Kind { Time, Rate };

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

/// A rate ends in per_second; a time in seconds (or step_seconds, train_seconds, ...).
Kind kind_of(const std::string& metric) {
  const std::string path = ends_with(metric, ".final") ? metric.substr(0, metric.size() - 6) : metric;
  if (ends_with(path, "per_second") || ends_with(path, "per_second_last_epoch")) return Kind::Rate;
  if (ends_with(path, "seconds")) return Kind::Time;
  throw UserError(
      fmt::format("--speedup-vs needs a time or a rate, and --metric {} is neither. Fix: use "
                  "--metric time_to_target.<column>.simulated_seconds (or .train_seconds), "
                  "simulated.samples_per_second, samples_per_second or seconds",
                  metric));
}

size_t index_in(const std::vector<std::string>& labels, const std::string& label) {
  return static_cast<size_t>(std::find(labels.begin(), labels.end(), label) - labels.begin());
}

}  // namespace

void apply_speedup(ResultTable& t, const std::vector<RunInfo>& runs) {
  const std::string condition = join(t.options.speedup_vs, ",");
  const Kind kind = kind_of(t.options.metric);
  // The baseline's values per row, and the cells (row, column) they come from.
  std::map<size_t, std::vector<double>> by_row;
  std::map<size_t, std::set<std::string>> cells_by_row;
  std::vector<double> all;
  std::set<std::string> all_cells;
  size_t matched = 0;
  for (const RunInfo& run : filter_runs(runs, t.options.speedup_vs)) {
    if (!run.has_summary() || run.diverged()) continue;
    ++matched;
    const std::optional<double> v = metric_value(run.summary, t.options.metric);
    if (!v || *v <= 0) continue;
    const size_t row = index_in(t.row_labels, label_of(run, t.options.rows));
    const std::string cell = label_of(run, t.options.rows) + " x " + label_of(run, t.options.cols);
    by_row[row].push_back(*v);
    cells_by_row[row].insert(cell);
    all.push_back(*v);
    all_cells.insert(cell);
  }
  if (all.empty() && matched > 0) {
    const bool target = t.options.metric.rfind("time_to_target.", 0) == 0;
    throw UserError(fmt::format(
        "--speedup-vs {}: its cell has {} finished run{}, and {} {}. Fix: {}", condition, matched,
        matched == 1 ? "" : "s", matched == 1 ? "it has no" : "none has a", 
        target ? fmt::format("{}: the run never reached its target (run.targets)", t.options.metric)
               : fmt::format("positive {}", t.options.metric),
        target ? "take as the baseline a cell that reached the target, or a target every cell reaches"
               : "take a metric the baseline's runs recorded"));
  }
  if (all.empty()) {
    throw UserError(
        fmt::format("--speedup-vs {}: no finished run matches it with a positive {}. Fix: name the "
                    "baseline cell by its keys, e.g. --speedup-vs scheme=dp,stages=2",
                    condition, t.options.metric));
  }
  for (auto& [rc, cell] : t.cells) {
    const bool own = by_row.count(rc.first) > 0;
    const std::set<std::string>& cells = own ? cells_by_row[rc.first] : all_cells;
    if (cells.size() > 1) {
      throw UserError(
          fmt::format("--speedup-vs {}: it matches runs of {} cells ({}), and a speed-up is over one. "
                      "Fix: add keys that pick one, e.g. its --cols keys",
                      condition, cells.size(), join(std::vector<std::string>(cells.begin(), cells.end()), "; ")));
    }
    const double base = describe(own ? by_row[rc.first] : all).mean;
    for (double& v : cell.values) v = kind == Kind::Time ? base / v : v / base;
  }
  t.speedup_baseline = condition;
}

}  // namespace pipelab::tools
