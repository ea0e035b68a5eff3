#include "core/schedule/validate.h"

#include <fmt/format.h>

#include <set>

#include "core/schedule/dataflow.h"
#include "core/util/error.h"
#include "core/util/names.h"

namespace pipelab {
namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw UserError("invalid schedule: " + what);
}

std::set<int> check_stage_order(const Schedule& s, int r, bool training) {
  std::set<int> forwards, backwards, heads;
  const auto& actions = s.stage(r);
  for (const Action& a : actions) {
    const std::string name = std::to_string(r) + a.text();
    if (a.kind == ActionKind::Update) continue;
    if (a.mb < 0) invalid(fmt::format("{} has a negative micro-batch id", name));
    if (a.kind == ActionKind::Forward) {
      if (!forwards.insert(a.mb).second) invalid(fmt::format("stage {} runs {} twice", r, name));
    } else {
      if (!forwards.count(a.mb)) invalid(fmt::format("stage {} runs {} before {}F{}", r, name, r, a.mb));
      std::set<int>& seen = a.kind == ActionKind::Head ? heads : backwards;
      if (!seen.insert(a.mb).second) invalid(fmt::format("stage {} runs {} twice", r, name));
    }
  }
  if (training) {
    for (int mb : forwards) {
      if (!backwards.count(mb)) {
        invalid(fmt::format("stage {} runs {}F{} but never {}B{} (micro-batch {} is incomplete)", r, r,
                            mb, r, mb, mb));
      }
    }
    if (!actions.empty() && actions.back().kind != ActionKind::Update) {
      invalid(fmt::format("stage {} ends with {}{}: its last gradients are never applied (end with {}U)",
                          r, r, actions.back().text(), r));
    }
  } else {
    for (const Action& a : actions) {
      if (a.kind != ActionKind::Forward) {
        invalid(fmt::format("a forward-only schedule contains {}{}", r, a.text()));
      }
    }
  }
  return forwards;
}

void check_in_flight(const Schedule& s, int r, int limit) {
  int in_flight = 0;
  for (const Action& a : s.stage(r)) {
    if (a.kind == ActionKind::Forward && ++in_flight > limit) {
      invalid(fmt::format("stage {} has {} micro-batches in flight at {}F{} (at most {} allowed)", r,
                          in_flight, r, a.mb, limit));
    }
    if (a.kind == ActionKind::Backward) --in_flight;
  }
}

}  // namespace

void validate_schedule(const Schedule& s, const ValidateOptions& options) {
  if (s.stages() == 0) invalid("it has no stages");
  const bool training = s.has_backward();
  const bool pipeline = s.links.forward == Links::Forward::Pipeline;
  std::set<int> first;
  for (int r = 0; r < s.stages(); ++r) {
    const std::set<int> mbs = check_stage_order(s, r, training);
    if (r == 0) {
      first = mbs;
    } else if (pipeline && mbs != first) {
      for (int mb : first) {
        if (!mbs.count(mb)) invalid(fmt::format("stage {} never runs micro-batch {} (stage 0 does)", r, mb));
      }
      for (int mb : mbs) {
        if (!first.count(mb)) invalid(fmt::format("stage {} runs micro-batch {} that stage 0 never runs", r, mb));
      }
    }
    if (static_cast<size_t>(r) < options.max_in_flight.size()) {
      check_in_flight(s, r, options.max_in_flight[static_cast<size_t>(r)]);
    }
  }
  const WalkResult walk = walk_schedule(s, [](int, size_t) {});
  if (!walk.complete) {
    std::string stuck;
    for (int r = 0; r < s.stages(); ++r) {
      const size_t i = walk.next[static_cast<size_t>(r)];
      if (i >= s.stage(r).size()) continue;
      const Action& a = s.stage(r)[i];
      std::vector<std::string> waits;
      for (const auto& [q, dep] : s.dependencies(r, a)) waits.push_back(std::to_string(q) + dep.text());
      if (waits.empty()) waits.push_back("the other stages' updates");
      stuck += fmt::format("{}stage {} waits at {}{} for {}", stuck.empty() ? "" : "; ", r, r, a.text(), join(waits, " and "));
    }
    invalid("deadlock: " + stuck);
  }
}

}  // namespace pipelab
