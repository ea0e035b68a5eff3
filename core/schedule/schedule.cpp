#include "core/schedule/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>

#include "core/util/error.h"

namespace pipelab {
namespace {

struct KindName {
  ActionKind kind;
  const char* name;
};
// Longest names first, so that parsing "SEND_F" does not stop at a shorter prefix.
constexpr std::array<KindName, 13> kKinds{{{ActionKind::AllReduce, "ALLREDUCE"},
                                           {ActionKind::SendF, "SEND_F"},
                                           {ActionKind::RecvF, "RECV_F"},
                                           {ActionKind::SendB, "SEND_B"},
                                           {ActionKind::RecvB, "RECV_B"},
                                           {ActionKind::SendH, "SEND_H"},
                                           {ActionKind::RecvH, "RECV_H"},
                                           {ActionKind::Forward, "F"},
                                           {ActionKind::Backward, "B"},
                                           {ActionKind::BackwardInput, "I"},
                                           {ActionKind::BackwardWeight, "W"},
                                           {ActionKind::Head, "H"},
                                           {ActionKind::Update, "U"}}};

bool takes_micro_batch(ActionKind k) { return k != ActionKind::Update && k != ActionKind::AllReduce; }

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

char payload(ActionKind k) {
  switch (k) {
    case ActionKind::SendF:
    case ActionKind::RecvF: return 'F';
    case ActionKind::SendB:
    case ActionKind::RecvB: return 'B';
    case ActionKind::SendH:
    case ActionKind::RecvH: return 'H';
    default: return 0;
  }
}

bool is_send(ActionKind k) { return k == ActionKind::SendF || k == ActionKind::SendB || k == ActionKind::SendH; }
bool is_receive(ActionKind k) { return k == ActionKind::RecvF || k == ActionKind::RecvB || k == ActionKind::RecvH; }
bool is_compute(ActionKind k) { return !is_send(k) && !is_receive(k) && k != ActionKind::AllReduce; }
bool is_backward(ActionKind k) {
  return k == ActionKind::Backward || k == ActionKind::BackwardInput || k == ActionKind::BackwardWeight;
}

std::string Action::kind_name(ActionKind k) {
  for (const KindName& n : kKinds) {
    if (n.kind == k) return n.name;
  }
  return "?";
}

std::string Action::text() const {
  return takes_micro_batch(kind) ? fmt::format("{}{}", kind_name(kind), mb) : kind_name(kind);
}

std::string Action::str() const { return std::to_string(stage) + text(); }

Action Action::parse(const std::string& token, std::string& why) {
  size_t i = 0;
  while (i < token.size() && std::isdigit(static_cast<unsigned char>(token[i]))) ++i;
  if (i == 0 || i > 9) {
    why = "it does not start with a stage number";
    return {};
  }
  Action a;
  a.stage = std::stoi(token.substr(0, i));
  const std::string rest = token.substr(i);
  for (const KindName& n : kKinds) {
    const std::string name = n.name;
    if (rest.compare(0, name.size(), name) != 0) continue;
    a.kind = n.kind;
    const std::string mb = rest.substr(name.size());
    if (!takes_micro_batch(n.kind)) {
      if (!mb.empty()) why = fmt::format("{} takes no micro-batch", name);
      return a;
    }
    if (!all_digits(mb)) {
      why = "the micro-batch number is missing or not a number";
      return a;
    }
    a.mb = std::stoi(mb);
    return a;
  }
  why = rest.empty() ? "the action is missing" : fmt::format("'{}' is not an action", rest);
  return a;
}

Schedule::Schedule(int stages, int devices) : stages_(stages), devices_(static_cast<size_t>(devices)) {}

std::vector<int> Schedule::placement() const {
  std::vector<int> out(static_cast<size_t>(stages_), -1);
  for (int d = 0; d < devices(); ++d) {
    for (const Action& a : device(d)) {
      if (a.stage >= 0 && a.stage < stages_ && out[static_cast<size_t>(a.stage)] < 0) out[static_cast<size_t>(a.stage)] = d;
    }
  }
  return out;
}

int Schedule::micro_batches() const {
  int most = -1;
  for (const auto& actions : devices_) {
    for (const Action& a : actions) most = std::max(most, a.mb);
  }
  return most + 1;
}

bool Schedule::has_backward() const {
  for (const auto& actions : devices_) {
    for (const Action& a : actions) {
      if (is_backward(a.kind) || a.kind == ActionKind::Head) return true;
    }
  }
  return false;
}

bool Schedule::has_communication() const {
  for (const auto& actions : devices_) {
    for (const Action& a : actions) {
      if (!is_compute(a.kind)) return true;
    }
  }
  return false;
}

Schedule Schedule::compute_only() const {
  Schedule out(stages_, devices());
  for (int d = 0; d < devices(); ++d) {
    for (const Action& a : device(d)) {
      if (is_compute(a.kind)) out.add(d, a);
    }
  }
  return out;
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

/// Adds the actions of one line (or CSV row) to `lists`; `device` < 0: by stage.
void add_tokens(std::vector<std::vector<Action>>& lists, int& stages, int device,
                const std::vector<std::pair<std::string, int>>& tokens, const std::string& source, int line_no) {
  for (const auto& [token, column] : tokens) {
    std::string why;
    const Action a = Action::parse(token, why);
    if (!why.empty()) {
      throw UserError(fmt::format("{}:{}:{}: bad action '{}': {}. Fix: write <stage><action>[<micro-batch>] with "
                                  "action F, B, I, W, H, U, SEND_F, RECV_F, SEND_B, RECV_B, SEND_H, RECV_H or "
                                  "ALLREDUCE, e.g. 0F1 2B0 1U 0SEND_F1",
                                  source, line_no, column, token, why));
    }
    const int d = device >= 0 ? device : a.stage;
    if (static_cast<size_t>(d) >= lists.size()) lists.resize(static_cast<size_t>(d) + 1);
    lists[static_cast<size_t>(d)].push_back(a);
    stages = std::max(stages, a.stage + 1);
  }
}

Schedule assemble(std::vector<std::vector<Action>>& lists, int stages) {
  Schedule s(stages, static_cast<int>(lists.size()));
  for (size_t d = 0; d < lists.size(); ++d) s.device(static_cast<int>(d)) = std::move(lists[d]);
  return s;
}

}  // namespace

Schedule Schedule::parse(const std::string& text, const std::string& source) {
  std::vector<std::vector<Action>> lists;
  int stages = 0;
  std::istringstream lines(text);
  std::string line;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    line = line.substr(0, line.find('#'));
    int device = -1;
    size_t pos = 0;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      size_t start = line.find_first_not_of(" \t");
      const std::string label = line.substr(start, colon - start);
      if (label.size() < 2 || label[0] != 'd' || !all_digits(label.substr(1))) {
        throw UserError(fmt::format("{}:{}:{}: '{}' is not a device label. Fix: start the line with d<k>: (d0:, d1:, "
                                    "...) or leave the label out",
                                    source, line_no, start + 1, line.substr(start, colon + 1 - start)));
      }
      device = std::stoi(label.substr(1));
      if (static_cast<size_t>(device) < lists.size() && !lists[static_cast<size_t>(device)].empty()) {
        throw UserError(fmt::format("{}:{}:{}: device d{} has a second line. Fix: list each device's actions on one "
                                    "line",
                                    source, line_no, start + 1, device));
      }
      if (static_cast<size_t>(device) >= lists.size()) lists.resize(static_cast<size_t>(device) + 1);
      pos = colon + 1;
    }
    std::vector<std::pair<std::string, int>> tokens;
    while (pos < line.size()) {
      const size_t start = line.find_first_not_of(" \t\r", pos);
      if (start == std::string::npos) break;
      const size_t end = std::min(line.find_first_of(" \t\r", start), line.size());
      tokens.emplace_back(line.substr(start, end - start), static_cast<int>(start) + 1);
      pos = end;
    }
    add_tokens(lists, stages, device, tokens, source, line_no);
  }
  return assemble(lists, stages);
}

Schedule Schedule::parse_csv(const std::string& text, const std::string& source) {
  std::vector<std::vector<Action>> lists;
  int stages = 0;
  std::istringstream lines(text);
  std::string line;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    std::vector<std::pair<std::string, int>> tokens;
    size_t start = 0;
    for (;;) {
      const size_t comma = std::min(line.find(',', start), line.size());
      std::string cell = line.substr(start, comma - start);
      const size_t a = cell.find_first_not_of(" \t\r\"");
      if (a != std::string::npos) {
        const size_t b = cell.find_last_not_of(" \t\r\"");
        tokens.emplace_back(cell.substr(a, b + 1 - a), static_cast<int>(start + a) + 1);
      }
      if (comma >= line.size()) break;
      start = comma + 1;
    }
    if (tokens.empty() && line.find_first_not_of(" \t\r,") == std::string::npos && lists.empty()) continue;
    const int device = static_cast<int>(lists.size());
    lists.emplace_back();
    add_tokens(lists, stages, device, tokens, source, line_no);
  }
  while (!lists.empty() && lists.back().empty()) lists.pop_back();
  return assemble(lists, stages);
}

}  // namespace pipelab
