/// The validator's checks across devices (validate.h): messages, collectives, in-flight
/// bounds and deadlocks, and how every problem is reported.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/schedule/dataflow.h"
#include "core/schedule/validate_report.h"
#include "core/util/error.h"
#include "core/util/names.h"

namespace pipelab::validation {

bool Report::from_file(int d, size_t i) const { return s_.source() && !s_.source()->quote(d, i).empty(); }

std::string Report::written(int d, size_t i) const {
  const ScheduleSource& src = *s_.source();
  const SourcePosition& p = src.at[static_cast<size_t>(d)][i];
  const std::string& line = src.lines[static_cast<size_t>(p.line - 1)];
  return "'" + printable(line.substr(static_cast<size_t>(p.column - 1), static_cast<size_t>(p.length))) + "'";
}

void Report::at(int d, size_t i, const std::string& what, const std::string& fix) const {
  const std::string fixed = fix.empty() ? "" : ". Fix: " + fix;
  if (from_file(d, i)) {
    const ScheduleSource& src = *s_.source();
    throw UserError(fmt::format("{}: invalid schedule: {} on device d{}: {}{}.\n{}", src.where(d, i), written(d, i), d,
                                what, fixed, src.quote(d, i)));
  }
  throw UserError(fmt::format("invalid schedule: device d{}, action {} ({}): {}{}.\n  {}", d, i, s_.device(d)[i].str(),
                              what, fixed, s_.window(d, i)));
}

void Report::whole(const std::string& what, const std::string& fix) const {
  // The fix stays on the first line; what follows a line break (a list of places) comes after.
  const ScheduleSource* src = s_.source();
  const size_t br = what.find('\n');
  throw UserError(fmt::format("{}invalid schedule: {}. Fix: {}.{}", src ? src->file + ": " : "", what.substr(0, br), fix,
                              br == std::string::npos ? "" : what.substr(br)));
}

std::string Report::place(int d, size_t i) const {
  return from_file(d, i) ? fmt::format("{} at {}", written(d, i), s_.source()->where(d, i))
                         : fmt::format("action {}", i);
}

namespace {

/// The stage a message comes from, and the action that sends it there.
std::pair<int, ActionKind> sender_of(const Action& receive) {
  return {peer(receive), send_kind(payload(receive.kind))};
}

/// What check_messages found: every message's place, and the stages that send or receive
/// activations.
struct Messages {
  const std::map<std::tuple<int, char, int>, std::pair<int, size_t>>& sends;
  const std::map<std::tuple<int, char, int>, std::pair<int, size_t>>& receives;
  const std::set<int>& sending_stages;
  const std::set<int>& receiving_stages;
};

/// A stage that sends (or receives) the activations of some micro-batches does so for all
/// it runs.
void check_every_forward_messaged(const Schedule& s, const Report& report, const Where& where, const Messages& m) {
  const auto& sends = m.sends;
  const auto& receives = m.receives;
  const std::set<int>& sending_stages = m.sending_stages;
  const std::set<int>& receiving_stages = m.receiving_stages;
  // The stage that runs micro-batch mb at the pipeline stage after `stage`'s: stage + 1,
  // or with replicated stages the replica that takes it (-1: none does; the coverage check
  // reports that).
  const auto next_stage = [&](int stage, int mb) {
    if (s.layout().uniform()) return stage + 1;
    const int position = s.position_of(stage) + 1;
    for (int r = 0; r < s.replicas(); ++r) {
      const int t = s.layout().stage(position, r);
      if (t >= 0 && where.count(key(t, ActionKind::Forward, mb))) return t;
    }
    return -1;
  };
  for (const auto& [k, at] : where) {
    const auto [stage, kind, mb] = k;
    const int next = kind == ActionKind::Forward && sending_stages.count(stage) ? next_stage(stage, mb) : -1;
    if (next >= 0 && !sends.count({next, 'F', mb})) {
      report.at(at.first, at.second,
                fmt::format("stage {} sends the output of other micro-batches to stage {} but not of this one (stage "
                            "{} never runs micro-batch {})",
                            stage, next, next, mb),
                fmt::format("give stage {} its {}F{}, or send this one", next, next, mb));
    }
    const int source = kind == ActionKind::Forward ? s.reads(stage, mb) : mb;  // replayed inputs read another's
    if (kind == ActionKind::Forward && receiving_stages.count(stage) && !receives.count({stage, 'F', source})) {
      report.at(at.first, at.second,
                fmt::format("stage {} receives the input of other micro-batches but not of this one", stage),
                fmt::format("add {}RECV_F{} before it", stage, source));
    }
  }
}

}  // namespace

void check_messages(const Schedule& s, const Report& report, const Where& where) {
  std::map<std::tuple<int, char, int>, std::pair<int, size_t>> sends, receives;  // message_key -> (device, index)
  std::set<int> receiving_stages, sending_stages;
  // With replayed inputs (Schedule::reads), per (stage, received micro-batch) the index of
  // the first forward that reads it.
  std::map<std::pair<int, int>, long> readers;
  if (s.replays()) {
    for (const auto& [k, at] : where) {
      const auto [stage, kind, mb] = k;
      if (kind != ActionKind::Forward) continue;
      const auto [it, fresh] = readers.insert({{stage, s.reads(stage, mb)}, static_cast<long>(at.second)});
      if (!fresh) it->second = std::min(it->second, static_cast<long>(at.second));
    }
  }
  const auto first_reader = [&readers](int stage, int mb) {
    const auto it = readers.find({stage, mb});
    return it == readers.end() ? -1L : it->second;
  };
  for (int d = 0; d < s.devices(); ++d) {
    const auto& actions = s.device(d);
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (!is_send(a.kind) && !is_receive(a.kind)) continue;
      // The latest index of a compute action of this stage and micro-batch that `counts`.
      const auto found = [&](auto counts) {
        long at = -1;
        for (const ActionKindInfo& k : action_kinds()) {
          const auto it = k.role == KindRole::Compute && counts(k) ? where.find(key(a.stage, k.kind, a.mb)) : where.end();
          if (it != where.end()) at = std::max(at, static_cast<long>(it->second.second));
        }
        return at;
      };
      const char p = payload(a.kind);
      const auto [to, pp, mb] = message_key(a);
      if (to < 0 || to >= s.stages()) {
        report.at(d, i, fmt::format("there is no stage {} to exchange with", to), "remove the action");
      }
      if (is_send(a.kind)) {
        const long produced = found([p](const ActionKindInfo& k) { return k.message == p; });
        if (produced < 0 || static_cast<size_t>(produced) > i) {
          report.at(d, i, "it sends a result not computed before it", "move it after the action that computes it");
        }
        if (!sends.emplace(message_key(a), std::make_pair(d, i)).second) {
          report.at(d, i, "the message is sent twice", "remove the second send");
        }
        if (p == 'F') sending_stages.insert(a.stage);
      } else {
        // An activation is used by the forward (replayed: by the first forward that reads
        // it), a gradient by the kind that consumes it.
        const long used = p == 'F' && s.replays()
                              ? first_reader(a.stage, a.mb)
                              : found([p](const ActionKindInfo& k) { return p == 'F' ? k.direction > 0 : k.takes_gradients; });
        if (used >= 0 && static_cast<size_t>(used) < i) {
          report.at(d, i, "it comes after the action that needs it", "move it before that action");
        }
        if (!receives.emplace(message_key(a), std::make_pair(d, i)).second) {
          report.at(d, i, "the message is received twice", "remove the second receive");
        }
        if (p == 'F') receiving_stages.insert(a.stage);
      }
    }
  }
  for (const auto& [k, at] : sends) {
    if (!receives.count(k)) {
      const auto [to, p, mb] = k;
      report.at(at.first, at.second, "no device receives this message",
                fmt::format("add {}RECV_{}{} on stage {}'s device before the action that uses it, or remove the send",
                            to, p, mb, to));
    }
  }
  for (const auto& [k, at] : receives) {
    if (!sends.count(k)) {
      const Action& a = s.device(at.first)[at.second];
      const auto [from, send] = sender_of(a);
      report.at(at.first, at.second, "no device sends this message",
                fmt::format("add {}{}{} on stage {}'s device after the action that computes it, or remove the "
                            "receive",
                            from, Action::kind_name(send), a.mb, from));
    }
  }
  check_every_forward_messaged(s, report, where, {sends, receives, sending_stages, receiving_stages});
}

void check_collectives(const Schedule& s, const Report& report) {
  // Per stage, where its ALLREDUCE actions are; each must match its group's first stage's.
  std::map<int, std::vector<std::pair<int, size_t>>> at;
  for (int d = 0; d < s.devices(); ++d) {
    for (size_t i = 0; i < s.device(d).size(); ++i) {
      if (kind_info(s.device(d)[i].kind).role == KindRole::Collective) at[s.device(d)[i].stage].push_back({d, i});
    }
  }
  for (int stage = 0; stage < s.stages(); ++stage) {
    const int first = s.collective_group(stage);
    if (stage == first) continue;
    const size_t mine = at[stage].size(), theirs = at[first].size();
    if (mine == theirs) continue;
    // Point at the extra ALLREDUCE of the stage that has more.
    const auto& more = mine > theirs ? at[stage] : at[first];
    const auto [d, i] = more[std::min(mine, theirs)];
    report.at(d, i,
              fmt::format("stage {} runs {} ALLREDUCE and stage {}, of its collective group, {}: an all-reduce "
                          "needs every stage of its group ({}), each time",
                          stage, mine, first, theirs,
                          s.collective_scope() == CollectiveScope::Model ? "every stage" : "the stage's replicas"),
              "give every stage of the group the same number of ALLREDUCE");
  }
}

void check_gradients_before_arrival(const Schedule& s, const Report& report) {
  // A device joins a collective round once, at its first ALLREDUCE of the round, bringing
  // every stage of the group it runs (dataflow.h, collective_arrivals): a gradient one of
  // those stages makes after that point would be missing from the sum.
  for (int d = 0; d < s.devices(); ++d) {
    const std::vector<bool> joins = collective_arrivals(s, d);
    std::map<int, size_t> joined;  // group -> rounds this device has arrived at
    std::map<int, size_t> done;    // stage -> its ALLREDUCE so far
    std::map<int, size_t> where;   // group -> the position of its latest arrival
    const auto& actions = s.device(d);
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const int group = s.collective_group(a.stage);
      if (kind_info(a.kind).role == KindRole::Collective) {
        if (joins[i]) {
          ++joined[group];
          where[group] = i;
        }
        ++done[a.stage];
        continue;
      }
      if (!kind_info(a.kind).leaves_gradient || joined[group] <= done[a.stage]) continue;
      report.at(d, i,
                fmt::format("{} makes a gradient of stage {} after its device joined all-reduce round {} (at "
                            "action {}), whose sum it would miss",
                            a.str(), a.stage, done[a.stage] + 1, where[group] + 1),
                fmt::format("move it before that ALLREDUCE, or stage {}'s ALLREDUCE before it", a.stage));
    }
  }
}

void check_in_flight(const Schedule& s, const Report& report, const std::vector<int>& limits) {
  for (int d = 0; d < s.devices(); ++d) {
    std::map<int, int> in_flight;
    const auto& actions = s.device(d);
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (static_cast<size_t>(a.stage) >= limits.size()) continue;
      const int limit = limits[static_cast<size_t>(a.stage)];
      if (a.kind == ActionKind::Forward && ++in_flight[a.stage] > limit) {
        report.at(d, i,
                  fmt::format("stage {} has {} micro-batches in flight (at most {} allowed)", a.stage,
                              in_flight[a.stage], limit),
                  fmt::format("run a backward of stage {} before this forward", a.stage));
      }
      if (kind_info(a.kind).frees_micro_batch) --in_flight[a.stage];
    }
  }
}

void check_deadlock(const Schedule& s, const Report& report) {
  const WalkResult walk = walk_schedule(s, [](int, size_t) {});
  if (walk.complete) return;
  std::string stuck;
  for (int d = 0; d < s.devices(); ++d) {
    const size_t i = walk.next[static_cast<size_t>(d)];
    if (i >= s.device(d).size()) continue;
    const Action& a = s.device(d)[i];
    std::string why = "the other devices' ALLREDUCE";
    if (is_receive(a.kind)) {
      const auto [from, send] = sender_of(a);
      why = fmt::format("{}{}{}", from, Action::kind_name(send), a.mb);
    }
    const std::string quote = s.source() ? s.source()->quote(d, i) : "";
    if (!quote.empty()) {
      stuck += fmt::format("\n  device d{} stops at {}, waiting for {}:\n  {}", d, report.place(d, i), why,
                           quote.substr(0, quote.find('\n')) + "\n  " + quote.substr(quote.find('\n') + 1));
    } else {
      stuck += fmt::format("\n  device d{}, action {} waits for {}:\n    {}", d, i, why, s.window(d, i));
    }
  }
  report.whole("deadlock: no device can go on" + stuck,
               "reorder the actions so that each device's next receive is sent by an action another device reaches "
               "first (above: where each device stops)");
}

}  // namespace pipelab::validation
