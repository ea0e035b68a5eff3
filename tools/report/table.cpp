#include "tools/report/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/io/json.h"
#include "core/util/error.h"
#include "core/util/names.h"
#include "tools/report/csv.h"
#include "tools/sweep/key_paths.h"

namespace pipelab::tools {

/// A path through a list (`per_stage.shadow_cosine`) is the mean over the list's elements
/// that have the rest of the path (a per-stage measurement, averaged over the stages).
std::optional<double> metric_value(const YAML::Node& summary, const std::string& metric) {
  const std::vector<std::string> keys = split_key_path(metric);
  YAML::Node n;
  n.reset(summary);
  for (size_t k = 0; k < keys.size(); ++k) {
    if (n.IsSequence()) {
      std::string rest = keys[k];
      for (size_t j = k + 1; j < keys.size(); ++j) rest += "." + keys[j];
      double sum = 0;
      int count = 0;
      for (const YAML::Node& element : n) {
        if (const auto v = metric_value(element, rest)) {
          sum += *v;
          ++count;
        }
      }
      return count > 0 ? std::optional<double>(sum / count) : std::nullopt;
    }
    if (!n.IsMap()) return std::nullopt;
    const YAML::Node next = static_cast<const YAML::Node&>(n)[keys[k]];
    if (!next.IsDefined()) return std::nullopt;
    n.reset(next);
  }
  if (n.IsMap() && n["final"]) n.reset(n["final"]);
  if (!n.IsDefined() || !n.IsScalar()) return std::nullopt;
  const std::optional<double> v = parse_number(n.Scalar());
  return v && std::isfinite(*v) ? v : std::nullopt;
}

namespace {

/// Whether `metric` is a time to a target (time_to_target.test_acc.simulated_seconds) that
/// the run's summary says was not reached.
bool not_reached(const YAML::Node& summary, const std::string& metric) {
  const std::vector<std::string> keys = split_key_path(metric);
  if (keys.size() < 2 || keys[0] != "time_to_target" || !summary.IsMap()) return false;
  const YAML::Node all = summary["time_to_target"];
  if (!all.IsMap()) return false;
  const YAML::Node one = all[keys[1]];
  return one.IsMap() && one["status"] && one["status"].IsScalar() && one["status"].Scalar() == "not reached";
}

/// Numeric paths of a summary, for the message about an unknown metric.
std::vector<std::string> numeric_paths(const YAML::Node& summary) {
  std::vector<std::pair<std::string, std::string>> leaves;
  flatten_leaves("", summary, leaves);
  std::vector<std::string> out;
  for (const auto& [path, text] : leaves) {
    if (metric_value(summary, path)) out.push_back(path);
  }
  return out;
}

/// A label seen on a run, the values it is made of, and the run's place in its sweep's grid.
struct Seen {
  std::string label;
  std::vector<std::string> values;
  int grid_order;
};

/// Distinct labels, sorted key by key (in the order the keys were given) by where each key's
/// value first appears in the sweep's grid; natural order when the runs have no grid order
/// (not written by `pipelab sweep`).
void sorted_labels(const std::vector<Seen>& seen, std::vector<std::string>& labels,
                   std::vector<std::vector<std::string>>& values) {
  std::vector<Seen> unique;
  bool gridded = true;
  std::vector<std::map<std::string, int>> rank;  // per key: value -> first grid position
  for (const Seen& s : seen) {
    gridded = gridded && s.grid_order >= 0;
    rank.resize(std::max(rank.size(), s.values.size()));
    for (size_t k = 0; k < s.values.size(); ++k) {
      auto [it, fresh] = rank[k].emplace(s.values[k], s.grid_order);
      if (!fresh) it->second = std::min(it->second, s.grid_order);
    }
    if (std::none_of(unique.begin(), unique.end(), [&](const Seen& u) { return u.label == s.label; })) unique.push_back(s);
  }
  std::sort(unique.begin(), unique.end(), [&](const Seen& a, const Seen& b) {
    if (gridded) {
      for (size_t k = 0; k < a.values.size() && k < b.values.size(); ++k) {
        const int ra = rank[k][a.values[k]], rb = rank[k][b.values[k]];
        if (ra != rb) return ra < rb;
      }
    }
    return natural_less(a.label, b.label);
  });
  for (Seen& u : unique) {
    labels.push_back(u.label);
    values.push_back(u.values);
  }
}

std::vector<std::string> values_of(const RunInfo& run, const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  for (const std::string& k : keys) out.push_back(config_text(run, k).value_or("-"));
  return out;
}

std::string keys_title(const std::vector<std::string>& keys) { return keys.empty() ? "all" : join(keys, " / "); }

size_t index_of(const std::vector<std::string>& labels, const std::string& label) {
  return static_cast<size_t>(std::find(labels.begin(), labels.end(), label) - labels.begin());
}

/// `label` without its "-" parts (keys a run lacks), joined by '/'.
std::string without_absent(const std::string& label) {
  std::string out, part;
  std::stringstream in(label);
  while (std::getline(in, part, '/')) {
    if (part == "-") continue;
    out += (out.empty() ? "" : "/") + part;
  }
  return out;
}

/// The table's label a reference table's label stands for: the same text, else the one label
/// equal to it but for "-" parts. A table of a partial sweep may lack a key that none of its
/// runs has, which the reference's labels carry as "-" (4/async against 4/async/-).
size_t reference_index(const std::vector<std::string>& labels, const std::string& label) {
  const size_t exact = index_of(labels, label);
  if (exact < labels.size()) return exact;
  size_t found = labels.size();
  for (size_t i = 0; i < labels.size(); ++i) {
    if (without_absent(labels[i]) != without_absent(label)) continue;
    if (found < labels.size()) return labels.size();  // ambiguous: no match
    found = i;
  }
  return found;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

/// Decimals for the table: four significant digits of its largest magnitude (90.81,
/// 0.5349, 20486), unless the user chose.
int table_decimals(const ResultTable& t) {
  if (t.options.decimals >= 0) return t.options.decimals;
  double largest = 0;
  for (const auto& [rc, cell] : t.cells) {
    for (const double v : cell.values) largest = std::max(largest, std::fabs(v));
    if (cell.reference) largest = std::max(largest, std::fabs(*cell.reference));
  }
  if (largest == 0) return 2;
  return std::clamp(3 - static_cast<int>(std::floor(std::log10(largest))), 0, 6);
}

}  // namespace

ResultTable build_table(const std::vector<RunInfo>& runs, const TableOptions& options) {
  for (const std::string& k : options.rows) require_config_key(runs, k, "--rows");
  for (const std::string& k : options.cols) require_config_key(runs, k, "--cols");
  ResultTable t;
  t.options = options;
  std::vector<const RunInfo*> complete;
  for (const RunInfo& run : runs) {
    if (run.has_summary()) {
      complete.push_back(&run);
    } else {
      ++t.incomplete;
    }
  }
  t.runs = static_cast<int>(complete.size());
  // A finished run must have the metric (a diverged one may lack it: its numbers are null).
  const auto finished = std::find_if(complete.begin(), complete.end(), [](const RunInfo* r) { return !r->diverged(); });
  const bool known = std::any_of(complete.begin(), complete.end(), [&](const RunInfo* r) {
    return !r->diverged() && (metric_value(r->summary, options.metric) || not_reached(r->summary, options.metric));
  });
  if (finished != complete.end() && !known) {
    throw UserError(fmt::format("--metric {}: no summary.json has this number. Fix: use one of: {}.", options.metric,
                                join(numeric_paths((*finished)->summary), ", ")));
  }
  std::vector<Seen> rows_seen, cols_seen;
  for (const RunInfo* run : complete) {
    rows_seen.push_back({label_of(*run, options.rows), values_of(*run, options.rows), run->grid_order});
    cols_seen.push_back({label_of(*run, options.cols), values_of(*run, options.cols), run->grid_order});
  }
  sorted_labels(rows_seen, t.row_labels, t.row_values);
  sorted_labels(cols_seen, t.col_labels, t.col_values);
  std::map<std::pair<size_t, size_t>, std::vector<const RunInfo*>> members;
  for (const RunInfo* run : complete) {
    const std::pair<size_t, size_t> rc{index_of(t.row_labels, label_of(*run, options.rows)),
                                       index_of(t.col_labels, label_of(*run, options.cols))};
    TableCell& cell = t.cells[rc];
    members[rc].push_back(run);
    if (run->diverged()) {
      ++cell.diverged;
    } else if (const auto v = metric_value(run->summary, options.metric)) {
      cell.values.push_back(*v);
    } else if (not_reached(run->summary, options.metric)) {
      ++cell.not_reached;
    } else {
      t.notes.push_back(fmt::format("{}: its summary.json has no finite number at {}, so its cell ({} x {}) leaves it "
                                    "out",
                                    run->name, options.metric, t.row_labels[rc.first], t.col_labels[rc.second]));
    }
  }
  // Mean ± std over a cell is only meaningful when its runs differ in nothing but the seed.
  for (const auto& [rc, group] : members) {
    const std::vector<std::string> mixed = differing_keys(group);
    if (mixed.empty()) continue;
    t.notes.push_back(
        fmt::format("{} x {} averages runs that differ in {}: add such keys to --rows/--cols, or pick "
                    "runs with --where key=value",
                    t.row_labels[rc.first], t.col_labels[rc.second], join(mixed, ", ")));
  }
  // One seed per cell: float32 runs of schedules equal in exact arithmetic drift apart by
  // summation order (docs/schemes.md, 'What "equal" means'), so a lone run is no estimate.
  // Simulated figures (simulated.samples_per_second) replay a plan: the same for any seed.
  size_t single = 0;
  for (const auto& [rc, cell] : t.cells) single += cell.values.size() == 1;
  if (single > 0 && options.metric.rfind("simulated.", 0) != 0) {
    t.notes.push_back(fmt::format("{} of {} cells hold one run: without ± std a difference between them may be noise "
                                  "(float32 runs of equal schemes drift apart by summation order); add seeds "
                                  "(run.seed in the sweep grid)",
                                  single, t.cells.size()));
  }
  if (t.incomplete > 0) {
    t.notes.push_back(fmt::format("{} run{} without a summary.json (interrupted or still running) {} not in the table",
                                  t.incomplete, t.incomplete == 1 ? "" : "s", t.incomplete == 1 ? "is" : "are"));
  }
  return t;
}

void add_reference(ResultTable& table, const std::string& csv_text, const std::string& name) {
  const std::vector<std::vector<std::string>> rows = parse_csv(csv_text, name);
  if (rows.size() < 2) {
    throw UserError(
        fmt::format("{}: expected a header row of column labels and one row per row label. Fix: write "
                    "e.g.\n  model,gpipe/2,gpipe/4\n  mlp,90.81,88.31",
                    name));
  }
  // A label twice would keep one of its rows (or columns) and drop the other unseen.
  std::map<std::string, size_t> row_line;
  for (size_t r = 1; r < rows.size(); ++r) {
    const auto [it, fresh] = row_line.emplace(trim(rows[r][0]), r + 1);
    if (!fresh) {
      throw UserError(fmt::format("{}: rows {} and {} are both labelled '{}'. Fix: keep one of them", name, it->second,
                                  r + 1, it->first));
    }
  }
  std::map<std::string, size_t> col_index;
  for (size_t c = 1; c < rows[0].size(); ++c) {
    const auto [it, fresh] = col_index.emplace(trim(rows[0][c]), c + 1);
    if (!fresh) {
      throw UserError(fmt::format("{}: columns {} and {} are both labelled '{}'. Fix: keep one of them", name,
                                  it->second, c + 1, it->first));
    }
  }
  int matched = 0;
  for (size_t r = 1; r < rows.size(); ++r) {
    const size_t row = reference_index(table.row_labels, trim(rows[r][0]));
    for (size_t c = 1; c < rows[r].size() && c < rows[0].size(); ++c) {
      const std::string text = trim(rows[r][c]);
      if (text.empty() || text == "-" || text == "–") continue;
      const std::optional<double> v = parse_number(text);
      if (!v) {
        throw UserError(
            fmt::format("{}: row {}, column '{}': '{}' is not a number. Fix: write numbers, or leave the "
                        "field empty.",
                        name, r + 1, trim(rows[0][c]), text));
      }
      const size_t col = reference_index(table.col_labels, trim(rows[0][c]));
      if (row == table.row_labels.size() || col == table.col_labels.size()) continue;
      table.cells[{row, col}].reference = *v;
      ++matched;
    }
  }
  if (matched == 0) {
    throw UserError(
        fmt::format("{}: none of its row and column labels match the table (rows: {}; columns: {}). Fix: "
                    "label them as the table does.",
                    name, join(table.row_labels, ", "), join(table.col_labels, ", ")));
  }
  table.reference_file = name;
}

std::string table_markdown(const ResultTable& t) {
  const int d = table_decimals(t);
  const auto num = [d](double v) { return fmt::format("{:.{}f}", v, d); };
  // n is shown only where a cell has fewer runs than the fullest cell (a missing seed).
  int most = 0;
  bool uniform = true;
  for (const auto& [rc, cell] : t.cells) {
    const int n = static_cast<int>(cell.values.size());
    if (n == 0) continue;
    uniform = uniform && (most == 0 || n == most);
    most = std::max(most, n);
  }
  const std::string how = most == 0   ? "no finished run"
                          : most == 1 ? "one run per cell"
                                      : fmt::format("mean ± std over {} runs per cell (sample std){}", most,
                                                    uniform ? "" : ", n where fewer");
  const std::string what = t.speedup_baseline.empty()
                               ? fmt::format("**{}**", t.options.metric)
                               : fmt::format("**speed-up** (x) of {} over {}", t.options.metric, t.speedup_baseline);
  std::string out =
      fmt::format("{} by {} (rows) and {} (columns): {}{}.\n\n", what, keys_title(t.options.rows),
                  keys_title(t.options.cols), how, t.reference_file.empty() ? "" : "; published values in parentheses");
  out += "| " + keys_title(t.options.rows) + " |";
  std::string rule = "|:--|";
  for (const std::string& c : t.col_labels) {
    out += " " + (c.empty() ? t.options.metric : c) + " |";
    rule += "--:|";
  }
  out += "\n" + rule + "\n";
  for (size_t r = 0; r < t.row_labels.size(); ++r) {
    out += "| " + (t.row_labels[r].empty() ? std::string("all") : t.row_labels[r]) + " |";
    for (size_t c = 0; c < t.col_labels.size(); ++c) {
      const auto it = t.cells.find({r, c});
      std::string text = "–";
      if (it != t.cells.end()) {
        const TableCell& cell = it->second;
        const Stats s = cell.stats();
        std::vector<std::string> extra;
        if (s.n > 0) {
          text = s.n > 1 ? num(s.mean) + " ± " + num(s.std) : num(s.mean);
          if (s.n < most) extra.push_back(fmt::format("n={}", s.n));
          if (cell.diverged > 0) extra.push_back(fmt::format("{} diverged", cell.diverged));
          if (cell.not_reached > 0) extra.push_back(fmt::format("{} not reached", cell.not_reached));
        } else if (cell.not_reached > 0) {
          text = "not reached";
          if (cell.diverged > 0) extra.push_back(fmt::format("{} diverged", cell.diverged));
        } else if (cell.diverged > 0) {
          text = "diverged";
        }
        for (const std::string& e : extra) text += ", " + e;
        if (cell.reference) text += " (" + num(*cell.reference) + ")";
      }
      out += " " + text + " |";
    }
    out += "\n";
  }
  for (const std::string& note : t.notes) out += "\nNote: " + note + ".\n";
  return out;
}

std::string table_csv(const ResultTable& t) {
  std::vector<std::string> header = t.options.rows;
  header.insert(header.end(), t.options.cols.begin(), t.options.cols.end());
  for (const char* h : {"n", "mean", "std", "min", "max", "diverged", "reference", "not_reached"}) header.push_back(h);
  std::string out = csv_line(header) + "\n";
  for (const auto& [rc, cell] : t.cells) {
    if (cell.values.empty() && cell.diverged == 0 && cell.not_reached == 0) continue;  // only a published value
    std::vector<std::string> f = t.row_values[rc.first];
    f.insert(f.end(), t.col_values[rc.second].begin(), t.col_values[rc.second].end());
    const Stats s = cell.stats();
    const auto opt = [&](double v) { return s.n > 0 ? json::number(v) : std::string(); };
    f.push_back(std::to_string(s.n));
    f.push_back(opt(s.mean));
    f.push_back(s.n > 1 ? json::number(s.std) : std::string());
    f.push_back(opt(s.min));
    f.push_back(opt(s.max));
    f.push_back(std::to_string(cell.diverged));
    f.push_back(cell.reference ? json::number(*cell.reference) : std::string());
    f.push_back(std::to_string(cell.not_reached));
    out += csv_line(f) + "\n";
  }
  return out;
}

}  // namespace pipelab::tools
