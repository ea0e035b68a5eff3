#pragma once
/// The CSV files a run appends a line to per step, per epoch or per stage measurement
/// (run_record.h), and how `--resume` checks them: it keeps the lines of the finished epochs,
/// cuts what a killed or failed write left after them, and refuses anything else.
#include <string>
#include <vector>

namespace pipelab {

struct MetricsFile {
  std::string name;    ///< under the run folder: "metrics/epochs.csv"
  std::string header;  ///< its first line
  int epoch_column;    ///< the column holding the (1-based) epoch of a line
  bool one_per_epoch;  ///< a line per finished epoch, in order (epochs.csv)
};

/// steps.csv, stages.csv and epochs.csv, with their headers.
const std::vector<MetricsFile>& metrics_files();

/// `text` of a file written before the newest columns of `file` existed (its header a
/// prefix of today's) with those columns added: the header widened, and "nan" appended to
/// every line for each missing field. Any other text is returned as it is.
std::string upgrade_metrics_text(const std::string& text, const MetricsFile& file);

/// How many lines of `text` (header included) belong to the first `epochs_done` epochs.
/// Lines after them may be later epochs or a last line cut short by a kill (both are
/// dropped); a missing or wrong header, a line that is not the file's (anywhere but at the
/// end), epochs out of order or missing are a UserError naming `path`:line and the fix,
/// raised before anything is rewritten.
size_t lines_to_keep(const std::string& text, const MetricsFile& file, int epochs_done, const std::string& path);

}  // namespace pipelab
