#include "core/schedule/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>

#include "core/util/error.h"

namespace pipelab {
namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

int peer(const Action& a) {
  // A send names its own stage, a receive the receiving one.
  const ActionKindInfo& k = kind_info(a.kind);
  if (a.peer >= 0 && (k.role == KindRole::Send || k.role == KindRole::Receive)) return a.peer;
  if (k.role == KindRole::Send) return a.stage + k.direction;
  if (k.role == KindRole::Receive) return a.stage - k.direction;
  return a.stage;
}

std::string Action::kind_name(ActionKind k) { return kind_info(k).name; }

std::string Action::text() const {
  std::string out = takes_micro_batch(kind) ? fmt::format("{}{}", kind_name(kind), mb) : kind_name(kind);
  if (peer >= 0 && is_send(kind)) out += fmt::format(">{}", peer);
  if (peer >= 0 && is_receive(kind)) out += fmt::format("<{}", peer);
  return out;
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
  // The longest name that starts the rest, so that "SEND_F" does not stop at a shorter one.
  const ActionKindInfo* found = nullptr;
  for (const ActionKindInfo& k : action_kinds()) {
    const std::string name = k.name;
    if (rest.compare(0, name.size(), name) == 0 && (!found || name.size() > std::string(found->name).size())) found = &k;
  }
  if (found) {
    const std::string name = found->name;
    a.kind = found->kind;
    std::string mb = rest.substr(name.size());
    // A message's peer when it is not the neighbour: "0SEND_F3>2", "2RECV_F3<0".
    const size_t arrow = mb.find_first_of("<>");
    if (arrow != std::string::npos) {
      const char want = is_send(a.kind) ? '>' : is_receive(a.kind) ? '<' : 0;
      const std::string to = mb.substr(arrow + 1);
      if (mb[arrow] != want) {
        why = want ? fmt::format("{} names its peer after '{}'", name, want) : fmt::format("{} has no peer", name);
        return a;
      }
      if (!all_digits(to) || std::stol(to) >= kMaxScheduleStages) {
        why = fmt::format("peer '{}' is not a stage number below {}", to.substr(0, 12), kMaxScheduleStages);
        return a;
      }
      a.peer = std::stoi(to);
      mb.resize(arrow);
    }
    if (!found->micro_batch) {
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
  layout_ = r == 1 ? StageLayout() : StageLayout::uniform(stages_ / r, r);
}

void Schedule::set_layout(StageLayout layout) {
  PIPELAB_ASSERT(!layout.replicated() || layout.stages() == stages_, "a layout of {} stages for a schedule of {}",
                 layout.stages(), stages_);
  layout_ = std::move(layout);
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

void Schedule::set_replay(std::vector<std::vector<int>> reads) {
  auto r = std::make_shared<Replay>();
  r->readers.resize(reads.size());
  for (size_t g = 0; g < reads.size(); ++g) {
    for (const int q : reads[g]) {
      PIPELAB_ASSERT(g > 0 && q >= 0, "stage {} replays micro-batch {} of the stage before it", g, q);
      auto& count = r->readers[g];
      if (count.size() <= static_cast<size_t>(q)) count.resize(static_cast<size_t>(q) + 1, 0);
      ++count[static_cast<size_t>(q)];
    }
  }
  r->reads = std::move(reads);
  replay_ = std::move(r);
}

int Schedule::reads(int stage, int mb) const {
  if (!replay_ || stage < 0 || static_cast<size_t>(stage) >= replay_->reads.size()) return mb;
  const auto& reads = replay_->reads[static_cast<size_t>(stage)];
  if (reads.empty()) return mb;
  PIPELAB_ASSERT(mb >= 0 && static_cast<size_t>(mb) < reads.size(), "stage {} has no replayed input for micro-batch {}",
                 stage, mb);
  return reads[static_cast<size_t>(mb)];
}

int Schedule::readers(int stage, int mb) const {
  if (!replay_ || stage < 0 || static_cast<size_t>(stage) >= replay_->reads.size() ||
      replay_->reads[static_cast<size_t>(stage)].empty()) {
    return 1;
  }
  const auto& count = replay_->readers[static_cast<size_t>(stage)];
  return mb >= 0 && static_cast<size_t>(mb) < count.size() ? count[static_cast<size_t>(mb)] : 0;
}

int Schedule::feed_unit(int stage, int mb) const {
  for (int g = stage; replay_ && g > 0; --g) mb = reads(g, mb);
  return mb;
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
      const KindRole role = kind_info(a.kind).role;
      if (role == KindRole::Send || role == KindRole::Receive || role == KindRole::Collective) return true;
    }
  }
  return false;
}

Schedule Schedule::compute_only() const {
  Schedule out(stages_, devices());
  out.copy_layout(*this);
  auto where = source_ ? std::make_shared<ScheduleSource>(*source_) : nullptr;
  for (int d = 0; d < devices(); ++d) {
    if (where) where->at[static_cast<size_t>(d)].clear();
    for (size_t i = 0; i < device(d).size(); ++i) {
      const Action& a = device(d)[i];
      if (!is_compute(a.kind) && !is_memory(a.kind)) continue;  // the program keeps its OFFLOADs and RELOADs
      out.add(d, a);
      if (where) where->at[static_cast<size_t>(d)].push_back(source_->at[static_cast<size_t>(d)][i]);
    }
  }
  out.set_source(where);
  return out;
}

}  // namespace pipelab
