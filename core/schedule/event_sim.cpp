#include "core/schedule/event_sim.h"

#include <algorithm>
#include <map>

#include "core/schedule/dataflow.h"
#include "core/util/error.h"

namespace pipelab {

EventTimeline replay(const Schedule& s, const EventCosts& costs) {
  const size_t devices = static_cast<size_t>(s.devices());
  const std::vector<int> placement = s.placement();
  const auto device_of = [&](int stage) { return placement.at(static_cast<size_t>(stage)); };
  const auto call = [](const std::function<double(const Action&)>& f, const Action& a) { return f ? f(a) : 0.0; };
  EventTimeline t;
  t.devices.resize(devices);
  std::vector<double> free_at(devices, 0);
  double worker_free = 0;  // one_worker: the single thread's clock
  std::map<std::pair<int, int>, double> link_free;  // (from, to) device -> when the link is idle
  std::map<std::tuple<int, char, int>, double> arrives;  // message -> when its receiver may take it
  std::vector<size_t> collectives_seen(static_cast<size_t>(s.stages()), 0);  // per stage
  std::map<std::pair<int, size_t>, double> collective_start;  // (group, k) -> start of its k-th ALLREDUCE
  std::map<std::pair<int, bool>, double> host_free;           // (device, to the host) -> when that way is idle
  std::map<std::pair<int, int>, double> offloaded, reloaded;  // (stage, mb) -> when its copy ended
  const WalkResult walk = walk_schedule(s, [&](int dev, size_t i) {
    const Action& a = s.device(dev)[i];
    const size_t d = static_cast<size_t>(dev);
    double start = costs.one_worker ? worker_free : free_at[d];
    double end = start;
    if (is_compute(a.kind)) {
      // A backward reads what a RELOAD brought back once its copy has ended.
      const auto back = kind_info(a.kind).takes_gradients ? reloaded.find({a.stage, a.mb}) : reloaded.end();
      if (back != reloaded.end()) start = std::max(start, back->second);
      end = start + costs.compute(dev, a);
    } else if (is_memory(a.kind)) {
      const bool out = a.kind == ActionKind::Offload;
      double& way = host_free[{dev, out}];
      double on = std::max(start, way);
      if (!out) on = std::max(on, offloaded.at({a.stage, a.mb}));
      way = on + call(costs.host, a);
      (out ? offloaded : reloaded)[{a.stage, a.mb}] = way;
      t.copies.push_back({a, dev, dev, on, way});
      if (!costs.overlap) end = way;
    } else if (is_receive(a.kind)) {
      start = std::max(start, arrives.at(message_key(a)));
      end = start;
    } else if (is_send(a.kind)) {
      const int to = device_of(std::get<0>(message_key(a)));
      if (to == dev) {
        arrives[message_key(a)] = start;
      } else {
        double& link = link_free[{dev, to}];
        const double on = std::max(start, link);
        link = on + call(costs.wire, a);
        const double arrival = link + call(costs.latency, a);
        arrives[message_key(a)] = arrival;
        t.transfers.push_back({a, dev, to, on, arrival});
        if (!costs.overlap) end = arrival;
      }
    } else if (kind_info(a.kind).role == KindRole::Collective) {
      const int group = s.collective_group(a.stage);
      const auto k = std::make_pair(group, collectives_seen.at(static_cast<size_t>(a.stage))++);
      if (!collective_start.count(k)) {
        // The walk visits a k-th ALLREDUCE only once every stage of its group has reached its
        // k-th, so their devices' free times are known: it waits for the latest of them.
        double latest = start;
        for (const int member : s.collective_stages(group)) {
          latest = std::max(latest, free_at.at(static_cast<size_t>(device_of(member))));
        }
        collective_start[k] = costs.one_worker ? worker_free : latest;
      }
      start = std::max(start, collective_start[k]);
      end = start + call(costs.collective, a);
    }
    free_at[d] = end;
    if (costs.one_worker) worker_free = end;
    t.devices[d].push_back({a, start, end});
  });
  PIPELAB_ASSERT(walk.complete, "replay needs a deadlock-free schedule");
  for (double f : free_at) t.makespan = std::max(t.makespan, f);
  for (const TimedTransfer& x : t.transfers) t.makespan = std::max(t.makespan, x.end);
  for (const TimedTransfer& x : t.copies) t.makespan = std::max(t.makespan, x.end);
  return t;
}

}  // namespace pipelab
