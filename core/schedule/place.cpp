#include "core/schedule/place.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "core/schedule/event_sim.h"
#include "core/schedule/lower.h"
#include "core/schedule/timeline.h"

namespace pipelab {

std::vector<int> Placement::resolve(int stages) const {
  switch (kind) {
    case Kind::Scheme: return {};
    case Kind::ClientServer: {
      // gpipe_test: the client (device 0) holds the first and the last stage.
      if (stages < 3) throw std::invalid_argument(fmt::format("client_server needs 3 stages or more, not {}", stages));
      std::vector<int> out(static_cast<size_t>(stages));
      for (int r = 0; r + 1 < stages; ++r) out[static_cast<size_t>(r)] = r;
      out.back() = 0;
      return out;
    }
    case Kind::Listed: break;
  }
  if (static_cast<int>(devices.size()) != stages) {
    throw std::invalid_argument(fmt::format("{} devices for {} stages", devices.size(), stages));
  }
  const int count = *std::max_element(devices.begin(), devices.end()) + 1;
  for (int d = 0; d < count; ++d) {
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) {
      throw std::invalid_argument(fmt::format("device {} holds no stage (devices are numbered 0..{} without gaps)", d,
                                              count - 1));
    }
  }
  return devices;
}

Placement ConfigValue<Placement>::read(const ConfigNode& n) {
  Placement p;
  if (n.yaml().IsScalar() && n.text() == "scheme") return p;
  if (n.yaml().IsScalar() && n.text() == "client_server") {
    p.kind = Placement::Kind::ClientServer;
    return p;
  }
  if (!n.yaml().IsSequence() || n.yaml().size() == 0) {
    n.fail(fmt::format("'{}' is not a placement", YAML::Dump(n.yaml())),
           "use scheme (the scheme's own), client_server (the first and the last stage on device 0, gpipe_test's) "
           "or a device per stage like [0, 1, 2, 0]");
  }
  p.kind = Placement::Kind::Listed;
  for (size_t i = 0; i < n.yaml().size(); ++i) {
    const ConfigNode c(n.yaml()[i], n.source(), fmt::format("{}[{}]", n.path(), i));
    const int d = ConfigValue<int>::read(c);
    if (d < 0 || d >= kMaxScheduleDevices) c.fail(fmt::format("device {} is not a device number", d), "use 0, 1, ...");
    p.devices.push_back(d);
  }
  return p;
}

YAML::Node ConfigValue<Placement>::write(const Placement& p) {
  switch (p.kind) {
    case Placement::Kind::Scheme: return YAML::Node("scheme");
    case Placement::Kind::ClientServer: return YAML::Node("client_server");
    case Placement::Kind::Listed: break;
  }
  return ConfigValue<std::vector<int>>::write(p.devices);
}

Schedule place_stages(const Schedule& in, const std::vector<int>& placement) {
  const Schedule s = with_communication(in);
  PIPELAB_ASSERT(static_cast<int>(placement.size()) == s.stages(), "a placement of {} stages for {}", placement.size(),
                 s.stages());
  // Every compute action costs something, so an action that waits for another starts later
  // than it; a message arrives when it is sent.
  const CostModel unit = CostModel::uniform(s.stages(), 1, 2, 0.25, 0.5);
  EventCosts costs;
  costs.compute = [&](int, const Action& a) { return unit.cost(a); };
  const EventTimeline t = replay(s, costs);
  // Each old device's actions bound for one new device form a queue (in their old order);
  // a new device takes, of its queues' heads, the one with the least (time, class, old
  // device). Time: a receive counts from its message's arrival, anything else from its
  // start. At one time a send comes before the receive that waits for it (class 0, then 1,
  // then the rest). Along a queue the times never decrease, so a k-way merge keeps every
  // queue's order.
  struct Entry {
    double time;
    int cls, old_device;
    Action action;
  };
  const int devices = *std::max_element(placement.begin(), placement.end()) + 1;
  std::vector<std::vector<std::vector<Entry>>> queues(static_cast<size_t>(devices),
                                                      std::vector<std::vector<Entry>>(t.devices.size()));
  for (size_t d = 0; d < t.devices.size(); ++d) {
    for (const TimedAction& x : t.devices[d]) {
      const int cls = is_send(x.action.kind) ? 0 : is_receive(x.action.kind) ? 1 : 2;
      const int to = placement[static_cast<size_t>(x.action.stage)];
      queues[static_cast<size_t>(to)][d].push_back({cls == 1 ? x.end : x.start, cls, static_cast<int>(d), x.action});
    }
  }
  Schedule out(s.stages(), devices);
  out.copy_layout(s);
  for (int d = 0; d < devices; ++d) {
    auto& mine = queues[static_cast<size_t>(d)];
    std::vector<size_t> next(mine.size(), 0);
    for (;;) {
      const Entry* best = nullptr;
      size_t from = 0;
      for (size_t q = 0; q < mine.size(); ++q) {
        if (next[q] == mine[q].size()) continue;
        const Entry& e = mine[q][next[q]];
        if (!best || std::tie(e.time, e.cls, e.old_device) < std::tie(best->time, best->cls, best->old_device)) {
          best = &e;
          from = q;
        }
      }
      if (!best) break;
      out.add(d, best->action);
      ++next[from];
    }
  }
  return out;
}

}  // namespace pipelab
