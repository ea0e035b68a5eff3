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

int peer(const Action& a) {
  const char p = payload(a.kind);
  if (!p) return a.stage;
  // A send names its own stage, a receive the receiving one.
  const int down = p == 'F' ? 1 : -1;
  return is_send(a.kind) ? a.stage + down : a.stage - down;
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
  if (i == 0) {
    why = "it does not start with a stage number";
    return {};
  }
  if (i > 9 || std::stol(token.substr(0, i)) >= kMaxScheduleStages) {
    why = fmt::format("stage {} is too large (at most {})", token.substr(0, std::min<size_t>(i, 12)),
                      kMaxScheduleStages - 1);
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
    if (mb.empty() || mb.find_first_not_of("0123456789") != std::string::npos) {
      why = "the micro-batch number is missing or not a number";
    } else if (!all_digits(mb)) {
      why = fmt::format("micro-batch {} is too large", mb.substr(0, 12));
    } else {
      a.mb = std::stoi(mb);
    }
    return a;
  }
  why = rest.empty() ? "it has a stage but no action (write e.g. 1F0, 1B0 or 1U)"
                     : fmt::format("'{}' is not an action", rest);
  return a;
}

Schedule::Schedule(int stages, int devices) : stages_(stages), devices_(static_cast<size_t>(devices)) {}

void Schedule::set_replicas(int r) {
  PIPELAB_ASSERT(r > 0 && stages_ % r == 0, "{} stages cannot be {} replicas of one pipeline", stages_, r);
  replicas_ = r;
}

std::vector<int> Schedule::collective_stages(int group) const {
  std::vector<int> out;
  for (int stage = 0; stage < stages_; ++stage) {
    if (collective_group(stage) == group) out.push_back(stage);
  }
  return out;
}

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
  out.replicas_ = replicas_;
  out.scope_ = scope_;
  auto where = source_ ? std::make_shared<ScheduleSource>(*source_) : nullptr;
  for (int d = 0; d < devices(); ++d) {
    if (where) where->at[static_cast<size_t>(d)].clear();
    for (size_t i = 0; i < device(d).size(); ++i) {
      const Action& a = device(d)[i];
      if (!is_compute(a.kind)) continue;
      out.add(d, a);
      if (where) where->at[static_cast<size_t>(d)].push_back(source_->at[static_cast<size_t>(d)][i]);
    }
  }
  out.set_source(where);
  return out;
}

}  // namespace pipelab
