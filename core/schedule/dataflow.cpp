#include "core/schedule/dataflow.h"

#include <algorithm>
#include <map>
#include <set>

namespace pipelab {

std::tuple<int, char, int> message_key(const Action& a) {
  return {is_send(a.kind) ? peer(a) : a.stage, payload(a.kind), a.mb};
}

std::vector<std::vector<size_t>> all_reduce_positions(const Schedule& s) {
  std::vector<std::vector<size_t>> out(static_cast<size_t>(s.devices()));
  for (int d = 0; d < s.devices(); ++d) {
    for (size_t i = 0; i < s.device(d).size(); ++i) {
      if (kind_info(s.device(d)[i].kind).role == KindRole::Collective) out[static_cast<size_t>(d)].push_back(i);
    }
  }
  return out;
}

std::vector<bool> collective_arrivals(const Schedule& s, int device) {
  const std::vector<Action>& actions = s.device(device);
  std::vector<bool> out(actions.size(), false);
  std::map<int, size_t> done;               // stage -> its ALLREDUCE so far
  std::set<std::pair<int, size_t>> joined;  // (group, round) the device has arrived at
  for (size_t i = 0; i < actions.size(); ++i) {
    if (kind_info(actions[i].kind).role != KindRole::Collective) continue;
    out[i] = joined.insert({s.collective_group(actions[i].stage), done[actions[i].stage]++}).second;
  }
  return out;
}

std::map<int, int> collective_devices(const Schedule& s) {
  std::map<int, std::set<int>> devices;
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) devices[s.collective_group(a.stage)].insert(d);
  }
  std::map<int, int> out;
  for (const auto& [group, set] : devices) out[group] = static_cast<int>(set.size());
  return out;
}

int collective_member(const Schedule& s, int stage) {
  const std::vector<int> members = s.collective_stages(s.collective_group(stage));
  return static_cast<int>(std::find(members.begin(), members.end(), stage) - members.begin());
}

// The walk is defined as rounds over the devices in order, each device running at most one
// ready action per round. Scanning every device every round costs devices x rounds, which
// is quadratic for long pipelines (100,000 stages took minutes), so the same order is
// produced from events: a round visits only the devices that may be ready (those that ran
// an action in the previous round, or whose awaited message or collective arrived), in
// increasing order. A device woken by an action of device d in the current round runs in
// this round when it comes after d (the scan would still reach it) and in the next
// otherwise. Cost: O(actions x log devices).
WalkResult walk_schedule(const Schedule& s, const std::function<void(int, size_t)>& visit) {
  const int devices = s.devices();
  std::set<std::tuple<int, char, int>> sent;
  std::map<std::tuple<int, char, int>, std::vector<int>> waiting;  // message -> devices blocked on it
  // A collective round is (group, k): the k-th ALLREDUCE of every stage of the group, which
  // every device of the group joins once (collective_arrivals).
  std::vector<std::vector<bool>> joins;
  for (int d = 0; d < s.devices(); ++d) joins.push_back(collective_arrivals(s, d));
  const std::map<int, int> members = collective_devices(s);  // group -> devices
  std::map<std::pair<int, size_t>, size_t> arrived;                   // round -> devices at it
  std::map<std::pair<int, size_t>, std::vector<int>> at_collective;  // round -> devices blocked at it
  std::vector<size_t> collectives_done(static_cast<size_t>(std::max(s.stages(), 0)), 0);  // per stage
  const auto round_of = [&](const Action& a) {
    return std::make_pair(s.collective_group(a.stage), collectives_done.at(static_cast<size_t>(a.stage)));
  };
  WalkResult result;
  result.next.assign(static_cast<size_t>(devices), 0);
  std::set<int> now, later;
  size_t remaining = 0;
  for (int d = 0; d < devices; ++d) {
    remaining += s.device(d).size();
    if (!s.device(d).empty()) now.insert(d);
  }
  const auto wake = [&](int d, int by) { (d > by ? now : later).insert(d); };
  // Device d has reached position next[d]: if that is an ALLREDUCE, it has arrived there.
  const auto arrive = [&](int d) {
    const size_t i = result.next[static_cast<size_t>(d)];
    if (i >= s.device(d).size() || kind_info(s.device(d)[i].kind).role != KindRole::Collective) return;
    if (!joins[static_cast<size_t>(d)][i]) return;
    const auto k = round_of(s.device(d)[i]);
    if (++arrived[k] < static_cast<size_t>(members.at(k.first))) return;
    for (const int q : at_collective[k]) wake(q, d);
    at_collective.erase(k);
  };
  for (int d = 0; d < devices; ++d) arrive(d);
  while (!now.empty()) {
    for (auto it = now.begin(); it != now.end(); it = now.erase(it)) {
      const int d = *it;
      size_t& i = result.next[static_cast<size_t>(d)];
      const Action& a = s.device(d)[i];
      if (is_receive(a.kind) && !sent.count(message_key(a))) {
        waiting[message_key(a)].push_back(d);
        continue;
      }
      if (kind_info(a.kind).role == KindRole::Collective) {
        const auto k = round_of(a);
        const auto it_arrived = arrived.find(k);
        if (it_arrived == arrived.end() || it_arrived->second < static_cast<size_t>(members.at(k.first))) {
          at_collective[k].push_back(d);
          continue;
        }
        ++collectives_done.at(static_cast<size_t>(a.stage));
      }
      visit(d, i);
      --remaining;
      if (is_send(a.kind)) {
        sent.insert(message_key(a));
        const auto w = waiting.find(message_key(a));
        if (w != waiting.end()) {
          for (const int q : w->second) wake(q, d);
          waiting.erase(w);
        }
      }
      if (is_receive(a.kind)) sent.erase(message_key(a));
      ++i;
      if (i < s.device(d).size()) {
        later.insert(d);
        arrive(d);
      }
    }
    std::swap(now, later);
  }
  result.complete = remaining == 0;
  return result;
}

}  // namespace pipelab
