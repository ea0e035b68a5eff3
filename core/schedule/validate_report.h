#pragma once
/// Internal to the validator (validate.cpp, validate_messages.cpp): how a problem is reported
/// and the checks of messages, collectives, in-flight bounds and deadlocks.
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab::validation {

using Key = std::tuple<int, ActionKind, int>;  // (stage, kind, mb)
inline Key key(int stage, ActionKind k, int mb) { return {stage, k, mb}; }
using Where = std::map<Key, std::pair<int, size_t>>;  // compute action -> (device, index)

/// Reports a problem at an action of the (lowered) schedule: at the user's file:line:column
/// with the line quoted when the schedule was read from a file, else with the device's
/// window of actions.
class Report {
 public:
  explicit Report(const Schedule& s) : s_(s) {}
  /// A UserError about action `i` of device `d`: what is wrong, and the fix ("" for none).
  [[noreturn]] void at(int d, size_t i, const std::string& what, const std::string& fix) const;
  /// A UserError about the schedule as a whole.
  [[noreturn]] void whole(const std::string& what, const std::string& fix) const;
  /// "'1F2' at my.sched:3:9" (the action as written), or "action 5" without a file.
  std::string place(int d, size_t i) const;

 private:
  bool from_file(int d, size_t i) const;
  /// The action as the user wrote it, quoted (a lowered RECV/SEND is named by the action
  /// it serves).
  std::string written(int d, size_t i) const;
  const Schedule& s_;
};

/// Every message is produced before it is sent and received before it is used, once.
void check_messages(const Schedule& s, const Report& report, const Where& where);
/// Every device runs as many ALLREDUCE as every other.
void check_collectives(const Schedule& s, const Report& report);
/// A device's stages have made their gradients by the time the device joins a round.
void check_gradients_before_arrival(const Schedule& s, const Report& report);
/// No stage holds more micro-batches between F and B (or W) than `limits` allows.
void check_in_flight(const Schedule& s, const Report& report, const std::vector<int>& limits);
/// The devices can run to the end (the dataflow walk completes).
void check_deadlock(const Schedule& s, const Report& report);

}  // namespace pipelab::validation
