#include "core/schedule/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/schedule/lower.h"
#include "core/schedule/validate_report.h"
#include "core/util/error.h"
#include "core/util/names.h"

namespace pipelab {
namespace {

using validation::key;
using validation::Report;
using validation::Where;

/// Every device and every stage has actions, each stage on one device, of allowed kinds.
void check_structure(const Schedule& s, const Report& report, const ValidateOptions& o) {
  const std::vector<int> placement = s.placement();
  for (int d = 0; d < s.devices(); ++d) {
    if (s.device(d).empty()) {
      report.whole(fmt::format("device d{} has no actions", d),
                   "give every device its stages' actions, or remove the device's line (devices are numbered d0, d1, "
                   "... without gaps)");
    }
    for (size_t i = 0; i < s.device(d).size(); ++i) {
      const Action& a = s.device(d)[i];
      if (a.stage < 0 || a.stage >= s.stages()) report.at(d, i, fmt::format("there is no stage {}", a.stage), "");
      if (placement[static_cast<size_t>(a.stage)] != d) {
        report.at(d, i,
                  fmt::format("stage {} also has actions on device d{}; a stage lives on one device", a.stage,
                              placement[static_cast<size_t>(a.stage)]),
                  fmt::format("move all of stage {}'s actions to one device", a.stage));
      }
      if (takes_micro_batch(a.kind) && a.mb < 0) report.at(d, i, "a negative micro-batch id", "number micro-batches from 0");
      if (!is_send(a.kind) && !is_receive(a.kind) && !is_memory(a.kind)) {
        if (!o.kinds.empty() && std::find(o.kinds.begin(), o.kinds.end(), a.kind) == o.kinds.end()) {
          std::vector<std::string> names;
          for (const ActionKind k : o.kinds) names.push_back(Action::kind_name(k));
          report.at(d, i,
                    fmt::format("this scheme runs no {} ({})", Action::kind_name(a.kind),
                                a.kind == ActionKind::AllReduce ? "an all-reduce needs replicas of a stage"
                                : a.kind == ActionKind::Head    ? "an H needs a stage with an auxiliary head"
                                                                : "not one of its action kinds"),
                    fmt::format("use only {}", join(names, ", ")));
        }
      }
    }
  }
  for (int st = 0; st < s.stages(); ++st) {
    if (placement[static_cast<size_t>(st)] < 0) {
      report.whole(fmt::format("stage {} has no actions (the schedule names stages up to {})", st, s.stages() - 1),
                   fmt::format("give stage {} its actions, or number the stages 0..{} without gaps", st,
                               s.stages() - 2));
    }
  }
}

/// The order of one compute action against the earlier ones of its stage.
void check_order(const Report& report, int d, size_t i, const Action& a, const Where& where) {
  const auto seen = [&](ActionKind k) { return where.count(key(a.stage, k, a.mb)) > 0; };
  const std::string st = std::to_string(a.stage);
  if (seen(a.kind)) report.at(d, i, "it runs twice", "remove the second one: each action runs once per micro-batch");
  if (a.kind != ActionKind::Forward && !seen(ActionKind::Forward)) {
    report.at(d, i, fmt::format("it runs before {}F{}", st, a.mb), fmt::format("move it after {}F{}", st, a.mb));
  }
  if (a.kind == ActionKind::Backward && seen(ActionKind::BackwardInput)) {
    report.at(d, i, fmt::format("{}I{} already ran: a micro-batch takes B, or I then W", st, a.mb),
              "keep either the B or the I and W");
  }
  if (a.kind == ActionKind::BackwardInput && seen(ActionKind::Backward)) {
    report.at(d, i, fmt::format("{}B{} already ran: a micro-batch takes B, or I then W", st, a.mb),
              "keep either the B or the I and W");
  }
  if (a.kind == ActionKind::BackwardWeight && !seen(ActionKind::BackwardInput)) {
    report.at(d, i, fmt::format("it runs before {}I{} (W follows I)", st, a.mb),
              fmt::format("move it after {}I{}", st, a.mb));
  }
}

/// Updates: each follows a gradient of its stage (B, W or H) since the previous one, or an
/// ALLREDUCE, which brings the other replicas' gradients (a replica without a shard of this
/// mini-batch still steps with their sum).
void check_updates(const Schedule& s, const Report& report, const ValidateOptions& o) {
  std::map<int, bool> gradient;  // stage -> a gradient since its last U
  std::map<int, int> updates;
  for (int d = 0; d < s.devices(); ++d) {
    for (size_t i = 0; i < s.device(d).size(); ++i) {
      const Action& a = s.device(d)[i];
      if (kind_info(a.kind).leaves_gradient) gradient[a.stage] = true;
      if (a.kind != ActionKind::Update) continue;
      if (!gradient[a.stage]) {
        report.at(d, i,
                  fmt::format("stage {} steps with no gradient since its {}", a.stage,
                              updates[a.stage] ? "previous step" : "start"),
                  fmt::format("put {0}U after a backward of stage {0} (B, or W), once per gradient", a.stage));
      }
      gradient[a.stage] = false;
      if (o.one_update && ++updates[a.stage] > 1) {
        report.at(d, i, fmt::format("stage {} steps twice; this scheme's weights are synchronous", a.stage),
                  fmt::format("keep one {}U, after the stage's last backward", a.stage));
      }
    }
  }
}

/// Order and completeness of every stage's compute actions, and where each sits.
void check_compute(const Schedule& s, const Report& report, bool training, Where& where) {
  for (int d = 0; d < s.devices(); ++d) {
    for (size_t i = 0; i < s.device(d).size(); ++i) {
      const Action& a = s.device(d)[i];
      if (!training && (is_memory(a.kind) || (is_compute(a.kind) && a.kind != ActionKind::Forward))) {
        report.at(d, i, fmt::format("a forward-only schedule contains {}", a.str()), "remove it");
      }
      if (!is_compute(a.kind) || a.kind == ActionKind::Update) continue;
      check_order(report, d, i, a, where);
      where[key(a.stage, a.kind, a.mb)] = {d, i};
    }
  }
  if (!training) return;
  for (const auto& [k, at] : where) {
    const auto [stage, kind, mb] = k;
    if (kind != ActionKind::Forward) continue;
    const bool whole = where.count(key(stage, ActionKind::Backward, mb)) > 0;
    const bool split = where.count(key(stage, ActionKind::BackwardInput, mb)) > 0 &&
                       where.count(key(stage, ActionKind::BackwardWeight, mb)) > 0;
    if (!whole && !split) {
      report.at(at.first, at.second, fmt::format("micro-batch {} never completes on stage {}", mb, stage),
                fmt::format("add {0}B{1} (or {0}I{1} and {0}W{1})", stage, mb));
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
        report.at(d, i, fmt::format("stage {}'s last gradients are never applied", stage),
                  fmt::format("end it with {}U", stage));
      }
    }
  }
}

/// OFFLOAD and RELOAD (PipeOffload): a micro-batch's saved activations leave the device after
/// its F and come back before its backward (B, or I) reads them, once each, on its stage's
/// device; none is left on the host.
void check_memory(const Schedule& s, const Report& report, const Where& where) {
  std::map<std::pair<int, int>, std::pair<int, size_t>> away;  // (stage, mb) -> its OFFLOAD, not yet reloaded
  std::set<std::pair<int, int>> offloaded, reloaded;
  for (int d = 0; d < s.devices(); ++d) {
    for (size_t i = 0; i < s.device(d).size(); ++i) {
      const Action& a = s.device(d)[i];
      const std::pair<int, int> mb{a.stage, a.mb};
      const std::string st = std::to_string(a.stage);
      if (kind_info(a.kind).takes_gradients && away.count(mb)) {
        report.at(d, i,
                  fmt::format("it reads activations still on the host ({}OFFLOAD{} has no RELOAD before it)", st, a.mb),
                  fmt::format("put {}RELOAD{} before it", st, a.mb));
      }
      if (!is_memory(a.kind)) continue;
      const auto f = where.find(key(a.stage, ActionKind::Forward, a.mb));
      const auto backward = [&](ActionKind k) {
        const auto b = where.find(key(a.stage, k, a.mb));
        return b != where.end() && b->second.first == d && b->second.second < i;
      };
      if (f == where.end() || f->second.first != d || f->second.second > i) {
        report.at(d, i, fmt::format("it runs before {}F{}, whose activations it moves", st, a.mb),
                  fmt::format("move it after {}F{}", st, a.mb));
      }
      if (backward(ActionKind::Backward) || backward(ActionKind::BackwardInput)) {
        report.at(d, i, fmt::format("{}'s backward of micro-batch {} already ran: nothing is kept to move", st, a.mb),
                  "move it before the backward");
      }
      if (a.kind == ActionKind::Offload) {
        if (!offloaded.insert(mb).second) report.at(d, i, "it runs twice", "offload each micro-batch once");
        away[mb] = {d, i};
      } else {
        if (!offloaded.count(mb)) {
          report.at(d, i, fmt::format("nothing to reload: no {}OFFLOAD{} before it", st, a.mb),
                    fmt::format("put {}OFFLOAD{} after {}F{}, or remove it", st, a.mb, st, a.mb));
        }
        if (!reloaded.insert(mb).second) report.at(d, i, "it runs twice", "reload each micro-batch once");
        away.erase(mb);
      }
    }
  }
  for (const auto& [mb, at] : away) {
    report.at(at.first, at.second, fmt::format("stage {}'s micro-batch {} is never reloaded", mb.first, mb.second),
              fmt::format("put {0}RELOAD{1} before its backward, or remove the OFFLOAD", mb.first, mb.second));
  }
}

/// The micro-batches 0..M-1 (M = 1 + the largest id) each run as `coverage` says, so no
/// share of the data is skipped.
void check_coverage(const Schedule& s, const Report& report, Coverage coverage, const Where& where) {
  if (coverage == Coverage::Any) return;
  std::map<int, std::vector<int>> runs;  // mb -> stages whose F runs it
  std::map<int, std::pair<int, size_t>> first_f;  // stage -> its first F
  for (const auto& [k, at] : where) {
    const auto [stage, kind, mb] = k;
    // With replayed inputs (Schedule::reads) later stages run the outputs they choose, as
    // often as they choose: the data is covered where it enters, at the first stage.
    if (kind != ActionKind::Forward || (s.replays() && s.position_of(stage) != 0)) continue;
    runs[mb].push_back(stage);
    const auto it = first_f.find(stage);
    if (it == first_f.end() || at.second < it->second.second) first_f[stage] = at;
  }
  const int m = s.micro_batches();
  int expected = 0;
  for (const auto& [mb, stages] : runs) {
    if (mb != expected) {
      const auto at = first_f.begin()->second;
      report.at(at.first, at.second,
                fmt::format("no stage runs micro-batch {} (the schedule's micro-batches are 0..{}), so that share of "
                            "every mini-batch would never be trained",
                            expected, m - 1),
                fmt::format("number the micro-batches 0..{} without gaps", static_cast<int>(runs.size()) - 1));
    }
    ++expected;
    const int replica = s.replica_of(stages.front());
    const auto other = std::find_if(stages.begin(), stages.end(), [&](int g) { return s.replica_of(g) != replica; });
    // Replicas of whole pipelines keep a micro-batch in one replica; replicated stages
    // (PipeDream's) pass it to whichever replica of the next stage takes it.
    if (s.layout().uniform() && other != stages.end()) {
      const auto at = first_f.at(*other);
      report.at(at.first, at.second,
                fmt::format("micro-batch {} runs on stage {} of replica {} and stage {} of replica {}; each replica "
                            "takes its own share",
                            mb, stages.front(), replica, *other, s.replica_of(*other)),
                "give each micro-batch to one replica");
    }
    if (!s.replays() && static_cast<int>(stages.size()) != s.pipeline_stages()) {
      std::set<int> positions;
      for (const int g : stages) positions.insert(s.position_of(g));
      int position = 0;
      while (positions.count(position)) ++position;
      if (position == s.pipeline_stages()) {  // every position runs it, one of them twice
        std::map<int, int> seen;
        for (const int g : stages) {
          const auto [it, fresh] = seen.insert({s.position_of(g), g});
          if (fresh) continue;
          const auto at = first_f.at(g);
          report.at(at.first, at.second,
                    fmt::format("micro-batch {} runs on stages {} and {}, two replicas of pipeline stage {}", mb,
                                it->second, g, it->first),
                    "give each micro-batch to one replica of each stage");
        }
      }
      const int missing = s.layout().stage(position, s.layout().uniform() ? replica : 0);
      const std::string what = fmt::format("stage {} never runs micro-batch {}, which other stages run", missing, mb);
      const std::string fix = fmt::format("give stage {0} its {0}F{1} (and its backward)", missing, mb);
      const auto it = first_f.find(missing);  // a stage may run no F at all (only updates)
      if (it == first_f.end()) report.whole(what, fix);
      report.at(it->second.first, it->second.second, what, fix);
    }
  }
}

/// With sequence segments (Schedule::segments), whole micro-batches of units, each stage
/// running a micro-batch's segments forward in order and backward in reverse order: a
/// segment attends to the earlier segments' keys and values, so their gradients are complete
/// only once every later segment's backward ran (core/nn/sequence_segment.h).
void check_segments(const Schedule& s, const Report& report, const Where& where) {
  const int k = s.segments();
  if (k <= 1) return;
  const int units = s.micro_batches();
  if (units % k != 0) {
    report.whole(fmt::format("{} units do not make whole micro-batches of {} segments", units, k),
                 fmt::format("number the units 0..{} (a multiple of {})", (units / k + 1) * k - 1, k));
  }
  for (const auto& [key_, at] : where) {
    const auto [stage, kind, mb] = key_;
    const int segment = mb % k;
    const auto find = [&](ActionKind kd, int unit) {
      const auto it = where.find(key(stage, kd, unit));
      return it == where.end() ? nullptr : &it->second;
    };
    const auto backward_of = [&](int unit) {
      const auto* b = find(ActionKind::Backward, unit);
      return b ? b : find(ActionKind::BackwardInput, unit);
    };
    const int mb_of = mb / k;
    if (kind == ActionKind::Forward && segment > 0) {
      const auto* before = find(ActionKind::Forward, mb - 1);
      if (!before || before->second > at.second) {
        report.at(at.first, at.second,
                  fmt::format("segment {} of micro-batch {} runs forward before segment {} (units are (micro-batch, "
                              "segment) pairs, {} segments each)",
                              segment, mb_of, segment - 1, k),
                  fmt::format("run {}F{} first: a segment attends to the earlier ones", stage, mb - 1));
      }
    }
    if ((kind == ActionKind::Backward || kind == ActionKind::BackwardInput) && segment + 1 < k) {
      const auto* after = backward_of(mb + 1);
      if (!after || after->second > at.second) {
        report.at(at.first, at.second,
                  fmt::format("segment {} of micro-batch {} runs backward before segment {} (units are (micro-batch, "
                              "segment) pairs, {} segments each)",
                              segment, mb_of, segment + 1, k),
                  fmt::format("run {}{}{} first: the later segments' gradients flow back into this one", stage,
                              Action::kind_name(kind), mb + 1));
      }
    }
  }
}

}  // namespace

void validate_schedule(const Schedule& in, const ValidateOptions& options) {
  const Schedule s = with_communication(in);
  const Report report(s);
  if (s.stages() == 0 || s.devices() == 0) report.whole("it has no actions", "write one line per device");
  check_structure(s, report, options);
  const bool training = s.has_backward();
  if (options.training && !training) {
    report.whole("it has no backward, so it would train nothing",
                 "add each micro-batch's B (or I and W) and each stage's U");
  }
  Where where;
  check_compute(s, report, training, where);
  if (training) check_memory(s, report, where);
  if (training) check_updates(s, report, options);
  check_coverage(s, report, training ? options.coverage : Coverage::Any, where);
  if (training) check_segments(s, report, where);
  validation::check_messages(s, report, where);
  validation::check_collectives(s, report);
  validation::check_gradients_before_arrival(s, report);
  validation::check_in_flight(s, report, options.max_in_flight);
  validation::check_deadlock(s, report);
}

}  // namespace pipelab
