/// The text form of a schedule (docs/schedules.md): the `d0: 0F0 0F1 ...` lines, read with the
/// position of every action (torch's CSV is torch_csv.cpp's).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "core/schedule/schedule.h"
#include "core/schedule/schedule_reader.h"
#include "core/util/error.h"
#include "core/util/names.h"

namespace pipelab {

std::string ScheduleSource::where(int d, size_t index) const {
  if (d < 0 || static_cast<size_t>(d) >= at.size() || index >= at[static_cast<size_t>(d)].size()) return file;
  const SourcePosition& p = at[static_cast<size_t>(d)][index];
  return fmt::format("{}:{}:{}", file, p.line, p.column);
}

std::string ScheduleSource::quote(int d, size_t index) const {
  if (d < 0 || static_cast<size_t>(d) >= at.size() || index >= at[static_cast<size_t>(d)].size()) return "";
  const SourcePosition& p = at[static_cast<size_t>(d)][index];
  if (p.line < 1 || static_cast<size_t>(p.line) > lines.size()) return "";
  const std::string& line = lines[static_cast<size_t>(p.line - 1)];
  // A window of about 90 characters around the action on long lines.
  const size_t col = static_cast<size_t>(p.column - 1);
  const size_t from = col > 50 ? col - 40 : 0;
  const size_t to = std::min(line.size(), std::max<size_t>(from + 90, col + static_cast<size_t>(p.length) + 10));
  const std::string head = fmt::format("  {} | {}", p.line, from > 0 ? "..." : "");
  const std::string text = printable(line.substr(from, to - from)) + (to < line.size() ? "..." : "");
  return fmt::format("{}{}\n{}{}", head, text, std::string(head.size() + col - from, ' '),
                     std::string(static_cast<size_t>(std::max(1, p.length)), '^'));
}

std::string Schedule::to_text() const {
  std::string out;
  for (int d = 0; d < devices(); ++d) {
    std::string line = fmt::format("d{}:", d);
    for (const Action& a : device(d)) line += " " + a.str();
    out += line + "\n";
  }
  // Replayed inputs have no action of their own: a comment says what each forward reads
  // (a reader of the text gets the order; the text form cannot carry the reads back).
  for (size_t g = 1; replay_ && g < replay_->reads.size(); ++g) {
    std::string line = fmt::format("# stage {} forwards read the outputs of stage {}:", g, g - 1);
    const auto& reads = replay_->reads[g];
    for (size_t mb = 0; mb < reads.size(); ++mb) line += fmt::format(" F{}<-{}", mb, reads[mb]);
    if (!reads.empty()) out += line + "\n";
  }
  return out;
}

std::string Schedule::window(int d, size_t index, const std::string& mark) const {
  const auto& actions = device(d);
  const size_t from = index > 4 ? index - 4 : 0;
  const size_t to = std::min(actions.size(), index + 5);
  std::string out = fmt::format("d{}:{}", d, from > 0 ? " ..." : "");
  for (size_t i = from; i < to; ++i) {
    out += " " + actions[i].str();
    if (i == index) out += " " + mark;
  }
  if (to < actions.size()) out += " ...";
  return out;
}

using detail::Reader;
using detail::Tokens;

namespace {

bool digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

Schedule Schedule::parse(const std::string& text, const std::string& source) {
  Reader reader(text, source);
  for (size_t n = 0; n < reader.lines().size(); ++n) {
    const int line_no = static_cast<int>(n) + 1;
    const std::string line = reader.lines()[n].substr(0, reader.lines()[n].find('#'));
    int device = -1;
    size_t pos = 0;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      const size_t start = line.find_first_not_of(" \t");
      const std::string label = line.substr(start, colon - start);
      const int column = static_cast<int>(start) + 1;
      if (label.size() < 2 || label[0] != 'd' || !digits(label.substr(1))) {
        reader.fail(line_no, column, fmt::format("'{}' is not a device label", printable(line.substr(start, colon + 1 - start))),
                    "start the line with d<k>: (d0:, d1:, ...) or leave the label out");
      }
      if (label.size() > 6) {
        reader.fail(line_no, column, fmt::format("device {} is beyond the {} devices a schedule may have", label,
                                                  kMaxScheduleDevices),
                    "number the devices d0, d1, ... without gaps");
      }
      device = std::stoi(label.substr(1));
      if (!reader.empty_device(device)) {
        reader.fail(line_no, column, fmt::format("device d{} has a second line", device),
                    "list each device's actions on one line");
      }
      reader.open_device(device, line_no, column);
      pos = colon + 1;
    }
    Tokens tokens;
    while (pos < line.size()) {
      const size_t start = line.find_first_not_of(" \t", pos);
      if (start == std::string::npos) break;
      const size_t end = std::min(line.find_first_of(" \t", start), line.size());
      tokens.emplace_back(line.substr(start, end - start), static_cast<int>(start) + 1);
      pos = end;
    }
    reader.add(device, tokens, line_no);
  }
  return reader.finish();
}

}  // namespace pipelab
