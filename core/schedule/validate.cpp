#include "core/schedule/validate.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "core/schedule/dataflow.h"
#include "core/schedule/lower.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

[[noreturn]] void invalid(const std::string& what) { throw UserError("invalid schedule: " + what); }

/// The first problem at action `i` of device `d`, with its window.
[[noreturn]] void invalid_at(const Schedule& s, int d, size_t i, const std::string& what) {
  invalid(fmt::format("device d{}, action {} ({}): {}\n  {}", d, i, s.device(d)[i].str(), what, s.window(d, i)));
}

using Key = std::tuple<int, char, int>;  // (stage, kind, mb)
Key key(int stage, ActionKind k, int mb) { return {stage, static_cast<char>(k), mb}; }

/// Order and completeness of every stage's compute actions, and where each sits.
void check_compute(const Schedule& s, bool training, std::map<Key, std::pair<int, size_t>>& where) {
  const std::vector<int> placement = s.placement();
  for (int d = 0; d < s.devices(); ++d) {
    const auto& actions = s.device(d);
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (a.stage < 0 || a.stage >= s.stages()) invalid_at(s, d, i, fmt::format("there is no stage {}", a.stage));
      if (placement[static_cast<size_t>(a.stage)] != d) {
        invalid_at(s, d, i, fmt::format("stage {} also has actions on device d{}; a stage lives on one device", a.stage,
                                        placement[static_cast<size_t>(a.stage)]));
      }
      const bool has_mb = a.kind != ActionKind::Update && a.kind != ActionKind::AllReduce;
      if (has_mb && a.mb < 0) invalid_at(s, d, i, "a negative micro-batch id");
      if (!training && is_compute(a.kind) && a.kind != ActionKind::Forward) {
        invalid_at(s, d, i, fmt::format("a forward-only schedule contains {}", a.str()));
      }
      if (!is_compute(a.kind) || a.kind == ActionKind::Update) continue;
      const auto seen = [&](ActionKind k) { return where.count(key(a.stage, k, a.mb)) > 0; };
      const std::string st = std::to_string(a.stage);
      if (seen(a.kind)) invalid_at(s, d, i, "it runs twice");
      if (a.kind != ActionKind::Forward && !seen(ActionKind::Forward)) {
        invalid_at(s, d, i, fmt::format("it runs before {}F{}", st, a.mb));
      }
      if (a.kind == ActionKind::Backward && seen(ActionKind::BackwardInput)) {
        invalid_at(s, d, i, fmt::format("{}I{} already ran: a micro-batch takes B, or I then W", st, a.mb));
      }
      if (a.kind == ActionKind::BackwardInput && seen(ActionKind::Backward)) {
        invalid_at(s, d, i, fmt::format("{}B{} already ran: a micro-batch takes B, or I then W", st, a.mb));
      }
      if (a.kind == ActionKind::BackwardWeight && !seen(ActionKind::BackwardInput)) {
        invalid_at(s, d, i, fmt::format("it runs before {}I{} (W follows I)", st, a.mb));
      }
      where[key(a.stage, a.kind, a.mb)] = {d, i};
    }
  }
  if (!training) return;
  for (const auto& [k, at] : where) {
    const auto [stage, kind, mb] = k;
    if (kind != 'F') continue;
    const bool whole = where.count(key(stage, ActionKind::Backward, mb)) > 0;
    const bool input = where.count(key(stage, ActionKind::BackwardInput, mb)) > 0;
    const bool weight = where.count(key(stage, ActionKind::BackwardWeight, mb)) > 0;
    if (!whole && !(input && weight)) {
      invalid_at(s, at.first, at.second,
                 fmt::format("micro-batch {} never completes on stage {}: add {}B{} (or {}I{} and {}W{})", mb, stage,
                             stage, mb, stage, mb, stage, mb));
    }
  }
  // Every stage that trains ends with an update after its last backward.
  for (int d = 0; d < s.devices(); ++d) {
    std::map<int, size_t> last;  // stage -> index of its last compute action
    for (size_t i = 0; i < s.device(d).size(); ++i) {
      if (is_compute(s.device(d)[i].kind)) last[s.device(d)[i].stage] = i;
    }
    for (const auto& [stage, i] : last) {
      const ActionKind k = s.device(d)[i].kind;
      if (k != ActionKind::Update && k != ActionKind::Forward) {
        invalid_at(s, d, i, fmt::format("stage {}'s last gradients are never applied: end it with {}U", stage, stage));
      }
    }
  }
}

/// Every message is produced before it is sent and received before it is used, once.
void check_messages(const Schedule& s, const std::map<Key, std::pair<int, size_t>>& where) {
  std::map<std::tuple<int, char, int>, std::pair<int, size_t>> sends, receives;
  std::set<int> receiving_stages, sending_stages;
  for (int d = 0; d < s.devices(); ++d) {
    const auto& actions = s.device(d);
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (!is_send(a.kind) && !is_receive(a.kind)) continue;
      const auto found = [&](ActionKind k) {
        const auto it = where.find(key(a.stage, k, a.mb));
        return it == where.end() ? -1L : static_cast<long>(it->second.second);
      };
      const char p = payload(a.kind);
      const auto [to, pp, mb] = message_key(a);
      if (to < 0 || to >= s.stages()) invalid_at(s, d, i, fmt::format("there is no stage {} to exchange with", to));
      if (is_send(a.kind)) {
        const long produced = p == 'F' ? found(ActionKind::Forward)
                              : p == 'H' ? found(ActionKind::Head)
                                         : std::max(found(ActionKind::Backward), found(ActionKind::BackwardInput));
        if (produced < 0 || static_cast<size_t>(produced) > i) invalid_at(s, d, i, "it sends a result not computed before it");
        if (!sends.emplace(message_key(a), std::make_pair(d, i)).second) invalid_at(s, d, i, "the message is sent twice");
        if (p == 'F') sending_stages.insert(a.stage);
      } else {
        const long used = p == 'F' ? found(ActionKind::Forward)
                                   : std::max(found(ActionKind::Backward), found(ActionKind::BackwardInput));
        if (used >= 0 && static_cast<size_t>(used) < i) invalid_at(s, d, i, "it comes after the action that needs it");
        if (!receives.emplace(message_key(a), std::make_pair(d, i)).second) invalid_at(s, d, i, "the message is received twice");
        if (p == 'F') receiving_stages.insert(a.stage);
      }
    }
  }
  for (const auto& [k, at] : sends) {
    if (!receives.count(k)) invalid_at(s, at.first, at.second, "no device receives this message");
  }
  for (const auto& [k, at] : receives) {
    if (!sends.count(k)) invalid_at(s, at.first, at.second, "no device sends this message");
  }
  for (const auto& [k, at] : where) {
    const auto [stage, kind, mb] = k;
    if (kind == 'F' && sending_stages.count(stage) && !sends.count({stage + 1, 'F', mb})) {
      invalid_at(s, at.first, at.second,
                 fmt::format("stage {} sends the output of other micro-batches to stage {} but not of this one (stage "
                             "{} never runs micro-batch {})",
                             stage, stage + 1, stage + 1, mb));
    }
    if (kind == 'F' && receiving_stages.count(stage) && !receives.count({stage, 'F', mb})) {
      invalid_at(s, at.first, at.second,
                 fmt::format("stage {} receives the input of other micro-batches but not of this one: add {}RECV_F{} "
                             "before it",
                             stage, stage, mb));
    }
  }
}

void check_in_flight(const Schedule& s, const std::vector<int>& limits) {
  for (int d = 0; d < s.devices(); ++d) {
    std::map<int, int> in_flight;
    const auto& actions = s.device(d);
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (static_cast<size_t>(a.stage) >= limits.size()) continue;
      const int limit = limits[static_cast<size_t>(a.stage)];
      if (a.kind == ActionKind::Forward && ++in_flight[a.stage] > limit) {
        invalid_at(s, d, i, fmt::format("stage {} has {} micro-batches in flight (at most {} allowed)", a.stage,
                                        in_flight[a.stage], limit));
      }
      if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardWeight) --in_flight[a.stage];
    }
  }
}

}  // namespace

void validate_schedule(const Schedule& in, const ValidateOptions& options) {
  if (in.stages() == 0 || in.devices() == 0) invalid("it has no stages");
  const Schedule s = with_communication(in);
  std::map<Key, std::pair<int, size_t>> where;
  check_compute(s, s.has_backward(), where);
  check_messages(s, where);
  const auto collectives = all_reduce_positions(s);
  for (int d = 1; d < s.devices(); ++d) {
    if (collectives[static_cast<size_t>(d)].size() != collectives[0].size()) {
      invalid(fmt::format("device d{} runs {} ALLREDUCE and device d0 {}: a collective needs every device, each time",
                          d, collectives[static_cast<size_t>(d)].size(), collectives[0].size()));
    }
  }
  check_in_flight(s, options.max_in_flight);
  const WalkResult walk = walk_schedule(s, [](int, size_t) {});
  if (!walk.complete) {
    std::string stuck;
    for (int d = 0; d < s.devices(); ++d) {
      const size_t i = walk.next[static_cast<size_t>(d)];
      if (i >= s.device(d).size()) continue;
      const Action& a = s.device(d)[i];
      std::string why = "the other devices' ALLREDUCE";
      if (is_receive(a.kind)) {
        const auto [to, p, mb] = message_key(a);
        const int from = p == 'F' ? a.stage - 1 : a.stage + 1;
        why = fmt::format("{}{}{}", from, Action::kind_name(p == 'F'   ? ActionKind::SendF
                                                             : p == 'B' ? ActionKind::SendB
                                                                        : ActionKind::SendH),
                          mb);
      }
      stuck += fmt::format("\n  device d{}, action {} waits for {}:\n    {}", d, i, why, s.window(d, i));
    }
    invalid("deadlock: no device can go on" + stuck);
  }
}

}  // namespace pipelab
