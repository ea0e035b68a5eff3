#include "core/records/metrics_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <sstream>

#include "core/records/run_record.h"
#include "core/util/error.h"
#include "core/util/names.h"

namespace pipelab {
namespace {

/// The epoch in field `column` of a line with `fields` fields, or -1 when the line is not one
/// this file's writer wrote.
int epoch_of(const std::string& line, size_t fields, int column) {
  if (static_cast<size_t>(std::count(line.begin(), line.end(), ',')) + 1 != fields) return -1;
  std::istringstream in(line);
  std::string field;
  for (int c = 0; c <= column; ++c) std::getline(in, field, ',');
  int epoch = -1;
  const auto [end, err] = std::from_chars(field.data(), field.data() + field.size(), epoch);
  return err == std::errc() && end == field.data() + field.size() && !field.empty() && epoch >= 0 ? epoch : -1;
}

[[noreturn]] void damaged(const std::string& path, size_t line, const std::string& what) {
  throw UserError(fmt::format("{}:{}: {}; --resume keeps a run's finished epochs and will not guess. Fix: restore the "
                              "file, or start the run again with --overwrite.",
                              path, line, what));
}

}  // namespace

const std::vector<MetricsFile>& metrics_files() {
  static const std::vector<MetricsFile> files = [] {
    std::string epochs = "epoch";
    for (const auto& [name, field] : epoch_fields()) epochs += "," + name;
    return std::vector<MetricsFile>{{"metrics/steps.csv", "step,epoch,loss,lr,simulated_time", 1, false},
                                    {"metrics/stages.csv", "epoch,step,stage,metric,value", 0, false},
                                    {"metrics/epochs.csv", epochs, 0, true}};
  }();
  return files;
}

std::string upgrade_metrics_text(const std::string& text, const MetricsFile& file) {
  const size_t end = text.find('\n');
  if (end == std::string::npos) return text;
  const std::string header = text.substr(0, end);
  if (header == file.header || file.header.rfind(header + ",", 0) != 0) return text;
  const auto fields = [](const std::string& line) { return std::count(line.begin(), line.end(), ',') + 1; };
  const long missing = fields(file.header) - fields(header);
  std::string padding;
  for (long i = 0; i < missing; ++i) padding += ",nan";
  std::string out = file.header + "\n";
  std::istringstream in(text.substr(end + 1));
  for (std::string line; std::getline(in, line);) {
    if (fields(line) == fields(header)) line += padding;  // a line cut short stays as it is
    out += line + "\n";
  }
  if (!text.empty() && text.back() != '\n' && !out.empty()) out.pop_back();  // keep a cut last line cut
  return out;
}

size_t lines_to_keep(const std::string& text, const MetricsFile& file, int epochs_done, const std::string& path) {
  std::vector<std::string> lines;
  {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  const bool ends_cut = !text.empty() && text.back() != '\n';
  if (lines.empty() || lines[0] != file.header) {
    damaged(path, 1,
            lines.empty() ? "the file is empty, without its header line"
                          : fmt::format("'{}' is not the header ('{}')", printable(lines[0].substr(0, 60)),
                                        file.header.substr(0, 60)));
  }
  const size_t fields = static_cast<size_t>(std::count(file.header.begin(), file.header.end(), ',')) + 1;
  size_t kept = 1;
  int last = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const int epoch = epoch_of(lines[i], fields, file.epoch_column);
    if (epoch < 0) {
      if (i + 1 == lines.size() && ends_cut) break;  // a write cut short by a kill
      damaged(path, i + 1, fmt::format("'{}' is not a line of this file", printable(lines[i].substr(0, 60))));
    }
    if (epoch < last) damaged(path, i + 1, fmt::format("epoch {} comes after epoch {}", epoch, last));
    if (epoch > epochs_done) {
      // Later epochs' lines (the interrupted epoch) are dropped; nothing of the finished
      // epochs may follow them.
      for (size_t j = i + 1; j < lines.size(); ++j) {
        const int later = epoch_of(lines[j], fields, file.epoch_column);
        if (later >= 0 && later <= epochs_done) {
          damaged(path, j + 1, fmt::format("epoch {} comes after epoch {}", later, epoch));
        }
      }
      break;
    }
    if (file.one_per_epoch && epoch != last + 1) {
      damaged(path, i + 1, fmt::format("epoch {} follows epoch {} (a line is missing)", epoch, last));
    }
    last = epoch;
    ++kept;
  }
  if (file.one_per_epoch && last != epochs_done) {
    damaged(path, kept + 1,
            fmt::format("the file has {} finished epoch{}, the training checkpoint {}", last, last == 1 ? "" : "s",
                        epochs_done));
  }
  return kept;
}

}  // namespace pipelab
