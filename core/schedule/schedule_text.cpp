/// The text forms of a schedule (docs/schedules.md): the `d0: 0F0 0F1 ...` lines and
/// torch.distributed.pipelining's CSV, read with the position of every action so that errors
/// found later (by the validator) still point at the user's file:line:column.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "core/schedule/schedule.h"
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

namespace {

/// A token of a line: its text and 1-based column.
using Tokens = std::vector<std::pair<std::string, int>>;

/// What parse and parse_csv build: the lists and where each action was written.
class Reader {
 public:
  Reader(const std::string& text, const std::string& file) : source_(std::make_shared<ScheduleSource>()) {
    source_->file = file;
    const size_t nul = text.find('\0');
    if (nul != std::string::npos) {
      const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(nul), '\n'));
      const size_t start = text.rfind('\n', nul);
      throw UserError(fmt::format("{}:{}:{}: a NUL byte: this is not a text file, or it is damaged. Fix: give the "
                                  "schedule file, saved as text.",
                                  file, line, nul - (start == std::string::npos ? 0 : start + 1) + 1));
    }
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      source_->lines.push_back(line);
    }
  }
  const std::vector<std::string>& lines() const { return source_->lines; }
  const std::string& file() const { return source_->file; }
  size_t devices() const { return lists_.size(); }
  bool empty_device(int d) const { return static_cast<size_t>(d) >= lists_.size() || lists_[static_cast<size_t>(d)].empty(); }

  /// Makes room for device `d` (a UserError at line:column beyond the limit).
  void open_device(int d, int line, int column) {
    if (d >= kMaxScheduleDevices) {
      fail(line, column, fmt::format("device d{} is beyond the {} devices a schedule may have", d, kMaxScheduleDevices),
           "number the devices d0, d1, ... without gaps");
    }
    if (static_cast<size_t>(d) >= lists_.size()) {
      lists_.resize(static_cast<size_t>(d) + 1);
      source_->at.resize(static_cast<size_t>(d) + 1);
    }
  }
  /// Adds the actions of one line (or CSV row) to device `device`, or by stage when < 0.
  void add(int device, const Tokens& tokens, int line) {
    for (const auto& [token, column] : tokens) {
      std::string why;
      const Action a = Action::parse(token, why);
      if (!why.empty()) bad_action(token, why, line, column);
      const int d = device >= 0 ? device : a.stage;
      open_device(d, line, column);
      lists_[static_cast<size_t>(d)].push_back(a);
      source_->at[static_cast<size_t>(d)].push_back({line, column, static_cast<int>(token.size())});
      stages_ = std::max({stages_, a.stage + 1, a.peer + 1});
    }
  }
  Schedule finish() {
    Schedule s(stages_, static_cast<int>(lists_.size()));
    for (size_t d = 0; d < lists_.size(); ++d) s.device(static_cast<int>(d)) = std::move(lists_[d]);
    s.set_source(source_);
    return s;
  }
  [[noreturn]] void fail(int line, int column, const std::string& what, const std::string& fix) const {
    throw UserError(fmt::format("{}:{}:{}: {}. Fix: {}.", file(), line, column, what, fix));
  }

 private:
  [[noreturn]] void bad_action(const std::string& token, const std::string& why, int line, int column) const {
    const bool label = token.size() > 1 && token[0] == 'd' &&
                       std::all_of(token.begin() + 1, token.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (label) {
      fail(line, column, fmt::format("'{}' looks like a device label without its colon", token),
           fmt::format("write `{}:` followed by the device's actions", token));
    }
    fail(line, column, fmt::format("bad action '{}': {}", printable(token), why),
         "write <stage><action>[<micro-batch>] with action F, B, I, W, H, U, SEND_F, RECV_F, SEND_B, RECV_B, SEND_H, "
         "RECV_H or ALLREDUCE, e.g. 0F1 2B0 1U 0SEND_F1");
  }

  std::shared_ptr<ScheduleSource> source_;
  std::vector<std::vector<Action>> lists_;
  int stages_ = 0;
};

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

Schedule Schedule::parse_csv(const std::string& text, const std::string& source) {
  Reader reader(text, source);
  for (size_t n = 0; n < reader.lines().size(); ++n) {
    const std::string& line = reader.lines()[n];
    Tokens tokens;
    size_t start = 0;
    for (;;) {
      const size_t comma = std::min(line.find(',', start), line.size());
      const std::string cell = line.substr(start, comma - start);
      const size_t a = cell.find_first_not_of(" \t\"");
      if (a != std::string::npos) {
        const size_t b = cell.find_last_not_of(" \t\"");
        tokens.emplace_back(cell.substr(a, b + 1 - a), static_cast<int>(start + a) + 1);
      }
      if (comma >= line.size()) break;
      start = comma + 1;
    }
    const bool blank = line.find_first_not_of(" \t,") == std::string::npos;
    if (blank && reader.devices() == 0) continue;  // leading blank rows
    const int device = static_cast<int>(reader.devices());
    reader.open_device(device, static_cast<int>(n) + 1, 1);
    reader.add(device, tokens, static_cast<int>(n) + 1);
  }
  Schedule s = reader.finish();
  // Trailing blank rows are not devices.
  int devices = s.devices();
  while (devices > 0 && s.device(devices - 1).empty()) --devices;
  if (devices == s.devices()) return s;
  Schedule trimmed(s.stages(), devices);
  auto where = std::make_shared<ScheduleSource>(*s.source());
  where->at.resize(static_cast<size_t>(devices));
  for (int d = 0; d < devices; ++d) trimmed.device(d) = s.device(d);
  trimmed.set_source(where);
  return trimmed;
}

}  // namespace pipelab
