#pragma once
/// What the schedule readers (schedule_text.cpp's text form, torch_csv.cpp's torch CSV) share:
/// the lists they build and where each action was written, so that errors found later (by the
/// validator) still point at the user's file:line:column.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/schedule/schedule.h"
#include "core/util/error.h"
#include "core/util/names.h"

namespace pipelab::detail {

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

}  // namespace pipelab::detail
