#include "core/exec/device_channels.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "core/schedule/lower.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

using Sequence = std::vector<std::pair<char, int>>;  // (payload, micro-batch) in order

/// Why NCCL cannot carry this run's CUDA tensors, from every stage's rank and device
/// identity ("" if it can).
std::string device_problem(const std::vector<std::string>& identity, const std::vector<int>& rank) {
  if (!dist::nccl_available()) return "this pipelab was built without NCCL";
  std::map<std::string, int> first_rank;
  for (size_t s = 0; s < identity.size(); ++s) {
    if (identity[s] == "cpu") return fmt::format("stage {} (rank {}) is on the CPU", s, rank[s]);
    const auto [it, fresh] = first_rank.emplace(identity[s], rank[s]);
    if (!fresh && it->second != rank[s]) {
      return fmt::format("ranks {} and {} share the GPU {} (NCCL needs a GPU of its own per rank)", it->second,
                         rank[s], identity[s]);
    }
  }
  return "";
}

}  // namespace

std::string untagged_order_problem(const Schedule& s, const std::function<int(int)>& rank_of) {
  std::map<std::pair<int, int>, Sequence> sent, received;
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) {
      if (!is_send(a.kind) && !is_receive(a.kind)) continue;
      const int other = peer(a);
      if (rank_of(a.stage) == rank_of(other)) continue;
      if (is_send(a.kind)) sent[{a.stage, other}].emplace_back(payload(a.kind), a.mb);
      else received[{other, a.stage}].emplace_back(payload(a.kind), a.mb);
    }
  }
  for (const auto& [edge, order] : sent) {
    const Sequence& taken = received[edge];
    if (order == taken) continue;
    size_t k = 0;
    while (k < order.size() && k < taken.size() && order[k] == taken[k]) ++k;
    const auto name = [](const Sequence& q, size_t i) {
      return i < q.size() ? fmt::format("{}{}", q[i].first, q[i].second) : std::string("nothing");
    };
    return fmt::format("stage {} sends {} as its message {} to stage {}, which takes {} there", edge.first,
                       name(order, k), k + 1, edge.second, name(taken, k));
  }
  return "";
}

void DeviceChannels::connect(const std::string& backend, ProcessWorld& world, const std::vector<c10::Device>& devices,
                             const Schedule& s) {
  const auto rank_of = [&](int stage) { return world.stage_owner(stage); };
  if (chosen_.empty()) {
    backend_ = backend;
    chosen_ = "gloo";
    if (backend != "gloo") {
      // Every rank learns every stage's device, so that all decide the same.
      std::ostringstream mine;
      for (size_t st = 0; st < devices.size(); ++st) {
        if (rank_of(static_cast<int>(st)) == world.rank()) mine << st << ' ' << dist::device_identity(devices[st]) << '\n';
      }
      std::vector<std::string> identity(devices.size()), all = world.gather_text("devices", mine.str());
      std::vector<int> rank(devices.size());
      for (const std::string& text : all) {
        std::istringstream in(text);
        size_t st;
        std::string id;
        while (in >> st >> id) identity.at(st) = id;
      }
      for (size_t st = 0; st < devices.size(); ++st) rank[st] = rank_of(static_cast<int>(st));
      const bool any_gpu = std::any_of(identity.begin(), identity.end(), [](const std::string& id) { return id != "cpu"; });
      std::string problem = device_problem(identity, rank);
      if (problem.empty()) problem = untagged_order_problem(s, rank_of);
      if (problem.empty()) {
        chosen_ = "nccl";
      } else if (backend == "auto" && !any_gpu) {
        // Nothing on a GPU: Gloo is what anyone would expect, and says nothing.
      } else if (backend == "nccl") {
        throw UserError(fmt::format("run.executor.backend: nccl, but {}. Fix: give every rank its own GPUs "
                                    "(device: cuda:N, CUDA_VISIBLE_DEVICES), or backend: gloo (host memory).",
                                    problem));
      } else if (world.writes_records()) {
        std::fprintf(stderr, "pipelab: backend auto uses gloo: %s\n", problem.c_str());
      }
    }
  } else if (chosen_ == "nccl") {
    const std::string problem = untagged_order_problem(s, rank_of);
    if (!problem.empty()) {
      throw UserError(fmt::format("run.executor.backend: {} chose nccl, but in a later schedule {}. Fix: backend: gloo.",
                                  backend_, problem));
    }
  }
  if (chosen_ != "nccl") return;
  // NCCL makes a communicator at its first operation, and both ranks must be there: each
  // new channel carries one element at once, every rank taking the edges in the same
  // (sorted) order, so that no rank waits in one edge's set-up for a peer held in another's.
  std::set<std::pair<int, int>> edges;
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) {
      if (is_send(a.kind)) edges.insert({a.stage, peer(a)});
    }
  }
  for (const std::pair<int, int>& edge : edges) {
    const int from = rank_of(edge.first), to = rank_of(edge.second);
    if (from == to || channels_.count(edge) || (world.rank() != from && world.rank() != to)) continue;
    auto channel = world.group().device_channel(from, to, fmt::format("nccl/{}-{}", edge.first, edge.second));
    const bool sender = world.rank() == from;
    const c10::Device here = devices.at(static_cast<size_t>(sender ? edge.first : edge.second));
    at::Tensor one = at::zeros({1}, at::TensorOptions().device(here));
    if (sender) {
      channel->send(one);
      channel->complete_sends();
    } else {
      channel->recv(one);
    }
    channels_[edge] = std::move(channel);
  }
}

dist::DeviceChannel* DeviceChannels::find(int from, int to) const {
  const auto it = channels_.find({from, to});
  return it == channels_.end() ? nullptr : it->second.get();
}

}  // namespace pipelab
