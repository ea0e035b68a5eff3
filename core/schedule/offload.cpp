#include "core/schedule/offload.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/util/error.h"

namespace pipelab {
namespace {

/// One micro-batch of an offloading stage on its device: where its forward and its first
/// backward (B, or I) are, and the compute actions between them.
struct Lifetime {
  int mb = 0;
  size_t forward = 0, backward = 0;
  int computes_between = 0;
};

/// Per offloading stage, its micro-batches' lifetimes on device `d` (those with a backward).
std::map<int, std::vector<Lifetime>> lifetimes(const Schedule& s, const OffloadPolicy& policy, int d) {
  const std::vector<Action>& actions = s.device(d);
  std::vector<int> computes_before(actions.size() + 1, 0);  // compute actions before index i
  for (size_t i = 0; i < actions.size(); ++i) {
    computes_before[i + 1] = computes_before[i] + (is_compute(actions[i].kind) ? 1 : 0);
  }
  std::map<std::pair<int, int>, size_t> forward;
  std::map<int, std::vector<Lifetime>> out;
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (!policy.offloads(a.stage)) continue;
    if (a.kind == ActionKind::Forward) forward[{a.stage, a.mb}] = i;
    const auto f = forward.find({a.stage, a.mb});
    if (!kind_info(a.kind).takes_gradients || f == forward.end()) continue;
    out[a.stage].push_back({a.mb, f->second, i, computes_before[i] - computes_before[f->second + 1]});
    forward.erase(f);
  }
  return out;
}

/// The longest-lived `fraction` of `all` that outlive `prefetch` compute actions.
std::vector<Lifetime> chosen(std::vector<Lifetime> all, const OffloadPolicy& policy) {
  const auto count = static_cast<size_t>(std::ceil(policy.fraction * static_cast<double>(all.size()) - 1e-9));
  std::stable_sort(all.begin(), all.end(), [](const Lifetime& a, const Lifetime& b) {
    return a.computes_between != b.computes_between ? a.computes_between > b.computes_between : a.mb < b.mb;
  });
  std::vector<Lifetime> out;
  for (const Lifetime& l : all) {
    if (out.size() < count && l.computes_between > policy.prefetch) out.push_back(l);
  }
  return out;
}

/// Where device `d`'s OFFLOAD of `l` goes: after its forward and the sends that follow it.
size_t after_forward(const std::vector<Action>& actions, const Lifetime& l) {
  size_t i = l.forward;
  while (i + 1 < actions.size() && is_send(actions[i + 1].kind) && actions[i + 1].stage == actions[l.forward].stage &&
         actions[i + 1].mb == l.mb) {
    ++i;
  }
  return i;
}

/// Where its RELOAD goes: before the `prefetch`-th compute action ahead of the backward (the
/// backward itself when 0), and before the receives in front of that action.
size_t before_backward(const std::vector<Action>& actions, const Lifetime& l, int prefetch) {
  size_t i = l.backward;
  for (int k = 0; k < prefetch; ++k) {
    do {
      --i;
    } while (!is_compute(actions[i].kind));
  }
  while (i > 0 && is_receive(actions[i - 1].kind)) --i;
  return i;
}

}  // namespace

std::vector<int> offloaded_micro_batches(const Schedule& s, const OffloadPolicy& policy, int stage) {
  std::vector<int> out;
  for (int d = 0; d < s.devices(); ++d) {
    const auto all = lifetimes(s, policy, d);
    const auto it = all.find(stage);
    if (it == all.end()) continue;
    for (const Lifetime& l : chosen(it->second, policy)) out.push_back(l.mb);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<bool> offloading_stages(const Schedule& s, const OffloadPolicy& policy) {
  std::vector<bool> out(static_cast<size_t>(s.stages()), false);
  for (int d = 0; d < s.devices(); ++d) {
    for (const auto& [stage, all] : lifetimes(s, policy, d)) {
      if (stage >= 0 && stage < s.stages() && !chosen(all, policy).empty()) out[static_cast<size_t>(stage)] = true;
    }
  }
  return out;
}

Schedule offload(const Schedule& s, const OffloadPolicy& policy) {
  PIPELAB_ASSERT(policy.fraction > 0 && policy.fraction <= 1 && policy.prefetch >= 0,
                 "an offload policy of a fraction in (0, 1] and a prefetch >= 0");
  Schedule out(s.stages(), s.devices());
  out.copy_layout(s);
  const ScheduleSource* in_source = s.source();
  auto where = in_source ? std::make_shared<ScheduleSource>(*in_source) : nullptr;
  for (int d = 0; d < s.devices(); ++d) {
    const std::vector<Action>& actions = s.device(d);
    std::map<size_t, std::vector<Action>> before, after;  // index -> actions inserted there
    for (const auto& [stage, all] : lifetimes(s, policy, d)) {
      for (const Lifetime& l : chosen(all, policy)) {
        after[after_forward(actions, l)].push_back(Action{stage, ActionKind::Offload, l.mb});
        before[before_backward(actions, l, policy.prefetch)].push_back(Action{stage, ActionKind::Reload, l.mb});
      }
    }
    std::vector<SourcePosition> at;
    const auto put = [&](const Action& a, size_t served) {
      out.add(d, a);
      if (where) at.push_back(in_source->at[static_cast<size_t>(d)][served]);
    };
    for (size_t i = 0; i < actions.size(); ++i) {
      for (const Action& a : before[i]) put(a, i);
      put(actions[i], i);
      for (const Action& a : after[i]) put(a, i);
    }
    if (where) where->at[static_cast<size_t>(d)] = std::move(at);
  }
  out.set_source(where);
  return out;
}

}  // namespace pipelab
