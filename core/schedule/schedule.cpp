#include "core/schedule/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "core/util/error.h"

namespace pipelab {

std::string Action::text() const {
  if (kind == ActionKind::Update) return "U";
  return fmt::format("{}{}", static_cast<char>(kind), mb);
}

int Schedule::micro_batches() const {
  int most = -1;
  for (const auto& actions : stages_) {
    for (const Action& a : actions) most = std::max(most, a.mb);
  }
  return most + 1;
}

bool Schedule::has_backward() const {
  for (const auto& actions : stages_) {
    for (const Action& a : actions) {
      if (a.kind == ActionKind::Backward || a.kind == ActionKind::Head) return true;
    }
  }
  return false;
}

bool Links::sends_back(ActionKind kind) const {
  return std::find(backward_inputs.begin(), backward_inputs.end(), kind) != backward_inputs.end();
}

std::vector<std::pair<int, Action>> Schedule::dependencies(int r, const Action& a) const {
  std::vector<std::pair<int, Action>> out;
  if (a.kind == ActionKind::Forward && r > 0 && links.forward == Links::Forward::Pipeline) out.emplace_back(r - 1, a);
  if (a.kind == ActionKind::Backward && r + 1 < stages()) {
    for (const ActionKind k : links.backward_inputs) out.emplace_back(r + 1, Action{k, a.mb});
  }
  return out;
}

std::string Schedule::to_text() const {
  std::string out;
  for (int r = 0; r < stages(); ++r) {
    std::string line;
    for (const Action& a : stage(r)) {
      if (!line.empty()) line += ' ';
      line += std::to_string(r) + a.text();
    }
    out += line + "\n";
  }
  return out;
}

Schedule Schedule::parse(const std::string& text) {
  std::vector<std::vector<Action>> stages;
  std::istringstream lines(text);
  std::string line;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    line = line.substr(0, line.find('#'));
    std::istringstream tokens(line);
    std::string token;
    while (tokens >> token) {
      size_t i = 0;
      while (i < token.size() && std::isdigit(static_cast<unsigned char>(token[i]))) ++i;
      const auto bad = [&](const std::string& why) {
        return UserError(fmt::format(
            "schedule line {}: bad action '{}': {}. Fix: write actions as <stage><F|H|B|U><micro-batch>, e.g. 0F1 2B0 1U",
            line_no, token, why));
      };
      if (i == 0) throw bad("it does not start with a stage number");
      if (i == token.size()) throw bad("the action letter is missing");
      const int stage = std::stoi(token.substr(0, i));
      const char kind = token[i];
      const std::string rest = token.substr(i + 1);
      Action action;
      if (kind == 'U') {
        if (!rest.empty()) throw bad("an update takes no micro-batch");
        action = Action::U();
      } else if (kind == 'F' || kind == 'B' || kind == 'H') {
        if (rest.empty() || !std::all_of(rest.begin(), rest.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
          throw bad("the micro-batch number is missing or not a number");
        }
        action = {static_cast<ActionKind>(kind), std::stoi(rest)};
      } else {
        throw bad(fmt::format("'{}' is not F, H, B or U", kind));
      }
      if (static_cast<size_t>(stage) >= stages.size()) stages.resize(static_cast<size_t>(stage) + 1);
      stages[static_cast<size_t>(stage)].push_back(action);
    }
  }
  Schedule s(static_cast<int>(stages.size()));
  for (size_t r = 0; r < stages.size(); ++r) s.stage(static_cast<int>(r)) = stages[r];
  return s;
}

}  // namespace pipelab
