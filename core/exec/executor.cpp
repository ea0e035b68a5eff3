#include "core/exec/executor.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <map>

#include <fmt/format.h>

namespace pipelab {

std::string Executor::thread_layout(int /*stages*/) const {
  const int n = at::get_num_threads();
  return fmt::format("1 thread x {} intra-op thread{}", n, n == 1 ? "" : "s");
}

void ExecStats::resolve_device_times() {
  // Every mark is first timed against one reference mark of its device, then shifted so
  // that the earliest is 0.
  std::map<c10::DeviceIndex, device::Mark> first;
  std::vector<std::pair<ActionRecord*, c10::DeviceIndex>> cuda;
  for (auto& stage : actions) {
    for (ActionRecord& a : stage) {
      if (!a.device_start_mark || !a.device_end_mark) continue;
      const c10::DeviceIndex d = device::mark_device(a.device_start_mark);
      if (!first.count(d)) first[d] = a.device_start_mark;
      cuda.emplace_back(&a, d);
    }
  }
  std::map<c10::DeviceIndex, double> earliest;
  for (auto& [a, d] : cuda) {
    a->device_start = device::seconds_between(first[d], a->device_start_mark);
    a->device_end = device::seconds_between(first[d], a->device_end_mark);
    earliest[d] = std::min(earliest.count(d) ? earliest[d] : a->device_start, a->device_start);
  }
  for (auto& [a, d] : cuda) {
    a->device_start -= earliest[d];
    a->device_end -= earliest[d];
  }
}

void ExecStats::reset(int stages) {
  const size_t n = static_cast<size_t>(stages);
  for (std::vector<ActionTime>& per_stage : time) per_stage.assign(n, {});
  for (std::vector<int64_t>& per_stage : bytes) per_stage.assign(n, 0);
  // One edge per stage, named by the stage on its near side (a plain pipeline's last is
  // never used; a replicated stage's copy sends on its own edge).
  bytes_forward.assign(n, 0);
  bytes_backward.assign(n, 0);
  messages_forward.assign(n, 0);
  messages_backward.assign(n, 0);
  wall_seconds = 0;
  actions.assign(n, {});
  peak_activation_bytes.assign(n, 0);
  device_peak_bytes.clear();
  host_peak_bytes.clear();
  memory = trace ? std::make_shared<MemoryMeter>() : nullptr;
  origin = std::chrono::steady_clock::now();
}

CostModel ExecStats::cost_model() const {
  CostModel c;
  for (const ActionKindInfo& k : action_kinds()) {
    if (k.role != KindRole::Compute) continue;
    for (const ActionTime& t : time[k.kind]) c.seconds[k.kind].push_back(t.mean());
  }
  return c;
}

void ExecStats::meter_devices(const Schedule& s) {
  if (!memory) return;
  const std::vector<int> placement = s.placement();
  for (size_t st = 0; st < placement.size(); ++st) {
    if (placement[st] < 0) continue;
    memory->group(static_cast<int>(st), placement[st]);
    memory->group(MemoryMeter::host_tag(static_cast<int>(st)), MemoryMeter::host_group(placement[st]));
  }
  device_peak_bytes.resize(std::max(device_peak_bytes.size(), static_cast<size_t>(s.devices())), 0);
  host_peak_bytes.resize(device_peak_bytes.size(), 0);
}

void ExecStats::read_memory_peaks() {
  if (!memory) return;
  for (size_t d = 0; d < device_peak_bytes.size(); ++d) {
    device_peak_bytes[d] = memory->group_usage(static_cast<int>(d)).peak;
  }
  host_peak_bytes.resize(device_peak_bytes.size(), 0);
  for (size_t d = 0; d < host_peak_bytes.size(); ++d) {
    host_peak_bytes[d] = memory->group_usage(MemoryMeter::host_group(static_cast<int>(d))).peak;
  }
  peak_activation_bytes.resize(actions.size(), 0);
  for (size_t s = 0; s < peak_activation_bytes.size(); ++s) {
    peak_activation_bytes[s] = memory->usage(static_cast<int>(s)).peak;
  }
}

}  // namespace pipelab
