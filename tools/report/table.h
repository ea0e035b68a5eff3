#pragma once
/// Result tables like the seeds' READMEs (models as rows, scheme x stages as columns): one
/// metric of summary.json per cell, `mean ± std` over the runs in a cell (seeds), diverged
/// runs shown as such, published numbers alongside when a reference table is given.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/report/run_index.h"
#include "tools/report/stats.h"

namespace pipelab::tools {

struct TableOptions {
  std::vector<std::string> rows, cols;    ///< config key paths (aliases already resolved)
  std::string metric = "test_acc.final";  ///< a summary.json path; `test_acc` means test_acc.final
  int decimals = -1;                      ///< -1: four significant digits of the largest value
  /// key=value conditions picking the baseline cell: each cell then shows its speed-up over
  /// it (tools/report/speedup.h); empty: the metric itself.
  std::vector<std::string> speedup_vs;
};

/// One cell: the metric of its finished runs, and how many diverged.
struct TableCell {
  std::vector<double> values;
  int diverged = 0;
  /// Runs whose summary says the time_to_target metric's target was never reached.
  int not_reached = 0;
  std::optional<double> reference;  ///< the published value, if a reference table has one
  /// Statistics of the finished runs' values.
  Stats stats() const { return describe(values); }
};

struct ResultTable {
  TableOptions options;
  std::vector<std::string> row_labels, col_labels;               ///< values of the keys joined by "/", natural order
  std::vector<std::vector<std::string>> row_values, col_values;  ///< the same, one value per key
  std::map<std::pair<size_t, size_t>, TableCell> cells;          ///< (row, column) -> cell; absent: no run
  int runs = 0, incomplete = 0;    ///< runs counted, and runs skipped for want of a summary
  std::vector<std::string> notes;  ///< warnings printed under the table
  std::string reference_file;
  std::string speedup_baseline;  ///< what the speed-ups are over ("" without --speedup-vs)
};

/// The metric in a summary.json: a number, or the `final` of a {final, best, best_epoch}
/// group; through a list, the mean over its elements. Nothing when absent or not finite.
std::optional<double> metric_value(const YAML::Node& summary, const std::string& metric);

/// Builds the table from `runs`. Unknown keys and a metric no summary has are UserErrors.
ResultTable build_table(const std::vector<RunInfo>& runs, const TableOptions& options);

/// Adds published values from a CSV shaped like the table: a header row whose first field
/// is free and whose others are column labels, then one row per row label. `name` names
/// the file in messages; a CSV whose labels match no cell is a UserError.
void add_reference(ResultTable& table, const std::string& csv_text, const std::string& name);

/// The table as Markdown, with a caption line and notes.
std::string table_markdown(const ResultTable& table);
/// One CSV line per cell with runs: the row and column keys, n, mean, std, min, max,
/// diverged, reference (full precision).
std::string table_csv(const ResultTable& table);

}  // namespace pipelab::tools
