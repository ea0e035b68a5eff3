#include "core/records/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "core/io/json.h"
#include "core/schedule/schedule.h"

namespace pipelab {
namespace {

/// An action's span in seconds: the device's clock where it was measured, else the host's.
std::pair<double, double> span_s(const ActionRecord& a) {
  if (a.device_start >= 0 && a.device_end >= 0) return {a.device_start, a.device_end};
  return {a.start, a.end};
}

/// The same in microseconds, the trace format's unit.
std::pair<double, double> span_us(const ActionRecord& a) {
  const auto [start, end] = span_s(a);
  return {start * 1e6, end * 1e6};
}

int device_of(const std::vector<int>& placement, size_t stage) {
  return stage < placement.size() ? placement[stage] : static_cast<int>(stage);
}

}  // namespace

namespace {

/// The metadata events: the process's name and one named track per device that ran anything.
void add_tracks(std::vector<json::Object>& events, const ExecStats& stats, const std::vector<int>& placement,
                const std::string& process_name) {
  json::Object process;
  process.add("name", "process_name").add("ph", "M").add("pid", 0).add("tid", 0);
  process.add("args", json::Object().add("name", process_name));
  events.push_back(process);
  std::map<int, bool> devices;
  for (size_t s = 0; s < stats.actions.size(); ++s) {
    if (!stats.actions[s].empty()) devices[device_of(placement, s)] = true;
  }
  for (const auto& [d, unused] : devices) {
    json::Object name;
    name.add("name", "thread_name").add("ph", "M").add("pid", 0).add("tid", d);
    name.add("args", json::Object().add("name", fmt::format("device {}", d)));
    events.push_back(name);
  }
}

/// (stage, payload, mb) -> the spans of the actions that produced it, in order: a
/// micro-batch id recurs in every schedule run of the epoch, and the n-th producer pairs
/// with the n-th consumer.
using Producers = std::map<std::tuple<size_t, char, int>, std::vector<std::pair<double, double>>>;

/// One complete ("X") event per action; what produced each message, into `producers`.
void add_actions(std::vector<json::Object>& events, Producers& producers, const ExecStats& stats,
                 const std::vector<int>& placement, const TraceArrows& arrows) {
  for (size_t s = 0; s < stats.actions.size(); ++s) {
    for (const ActionRecord& a : stats.actions[s]) {
      const auto [start, end] = span_us(a);
      const Action action{static_cast<int>(s), a.kind, a.mb};
      json::Object e;
      e.add("name", action.str()).add("cat", Action::kind_name(a.kind)).add("ph", "X");
      e.add("ts", start).add("dur", end - start).add("pid", 0).add("tid", device_of(placement, s));
      json::Object args;
      args.add("stage", static_cast<int64_t>(s));
      if (a.mb >= 0) args.add("micro_batch", a.mb);
      args.add("bytes", a.bytes);
      e.add("args", args);
      events.push_back(e);
      // An activation leaves with F; the backward message with the kind that consumes the
      // gradients (B, or I when the backward is split), which is also the one that uses it.
      const ActionKindInfo& kind = kind_info(a.kind);
      if (kind.role == KindRole::Compute && kind.direction > 0 && arrows.activations) {
        producers[{s, kind.message, a.mb}].push_back({start, end});
      }
      if (kind.takes_gradients && arrows.gradients) producers[{s, 'B', a.mb}].push_back({start, end});
    }
  }
}

/// Arrows: stage s's F of mb feeds stage s+1's F of mb; its B (or I) feeds stage s-1's.
void add_arrows(std::vector<json::Object>& events, const Producers& producers, const std::vector<int>& placement) {
  int64_t id = 0;
  const auto arrow = [&](const std::pair<double, double>& from, size_t from_stage, const std::pair<double, double>& to,
                         size_t to_stage, const char* name) {
    ++id;
    // A flow start binds to the slice enclosing its timestamp, a flow end ("bp": "e") too.
    json::Object s, f;
    s.add("name", name).add("cat", "message").add("ph", "s").add("id", id);
    s.add("ts", from.first + (from.second - from.first) * 0.999).add("pid", 0).add("tid", device_of(placement, from_stage));
    f.add("name", name).add("cat", "message").add("ph", "f").add("bp", "e").add("id", id);
    f.add("ts", to.first + (to.second - to.first) * 0.001).add("pid", 0).add("tid", device_of(placement, to_stage));
    events.push_back(s);
    events.push_back(f);
  };
  for (const auto& [key, from] : producers) {
    const auto [s, payload, mb] = key;
    if (payload == 'B' && s == 0) continue;
    const size_t next = payload == 'F' ? s + 1 : s - 1;
    const auto to = producers.find({next, payload, mb});
    if (to == producers.end()) continue;
    for (size_t n = 0; n < std::min(from.size(), to->second.size()); ++n) {
      arrow(from[n], s, to->second[n], next, payload == 'F' ? "activation" : "gradient");
    }
  }
}

}  // namespace

std::string chrome_trace(const ExecStats& stats, const std::vector<int>& placement, TraceArrows arrows) {
  std::vector<json::Object> events;
  add_tracks(events, stats, placement, arrows.process);
  Producers producers;
  add_actions(events, producers, stats, placement, arrows);
  add_arrows(events, producers, placement);
  json::Object root;
  root.add("traceEvents", events).add("displayTimeUnit", "ms");
  return root.str() + "\n";
}

std::string actions_csv(const ExecStats& stats, const std::vector<int>& placement) {
  // Device by device, in the order the device ran them (a device that holds several stages
  // interleaves them: a V-schedule, Chimera's two pipelines). Host start times order them:
  // one device's actions run one after another on one thread.
  struct Row {
    int device;
    double start;
    size_t stage;
    const ActionRecord* action;
  };
  std::vector<Row> rows;
  for (size_t s = 0; s < stats.actions.size(); ++s) {
    for (const ActionRecord& a : stats.actions[s]) rows.push_back({device_of(placement, s), a.start, s, &a});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.device != b.device ? a.device < b.device : a.start < b.start;
  });
  std::string out = "device,stage,action,micro_batch,start,end,bytes_sent\n";
  for (const Row& r : rows) {
    const auto [start, end] = span_s(*r.action);
    out += fmt::format("{},{},{},{},{},{},{}\n", r.device, r.stage, Action::kind_name(r.action->kind), r.action->mb,
                       json::number(start), json::number(end), r.action->bytes);
  }
  return out;
}

}  // namespace pipelab
