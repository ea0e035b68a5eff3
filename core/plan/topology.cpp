#include "core/plan/topology.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "core/plan/run_plan.h"

namespace pipelab {
namespace {

std::string plural(int n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

}  // namespace

std::string Topology::text() const {
  if (!stage_copies.empty()) {
    return fmt::format("{} (1 pipeline of {}, copies {}: PipeDream's replicated stages)", plural(devices, "device"),
                       plural(stages, "stage"), fmt::join(stage_copies, "-"));
  }
  // A placement that puts more stages on some devices (client_server) says the most.
  const bool even = stages == devices_per_pipeline * stages_per_device;
  if (shared()) {
    return fmt::format("{} ({} over the same {}, {}{} a device each, {} a pipeline)", plural(devices, "device"),
                       plural(pipelines, "pipeline"), plural(devices_per_pipeline, "device"), even ? "" : "up to ",
                       plural(stages_per_device, "stage"), plural(stages, "stage"));
  }
  return fmt::format("{} ({} of {}, {}{} a device, {} a pipeline)", plural(devices, "device"),
                     plural(pipelines, "pipeline"), plural(devices_per_pipeline, "device"), even ? "" : "up to ",
                     plural(stages_per_device, "stage"), plural(stages, "stage"));
}

std::string Topology::cell() const {
  if (!stage_copies.empty()) return fmt::format("copies {}", fmt::join(stage_copies, "-"));
  return fmt::format("{} x {} x {}{}", pipelines, devices_per_pipeline, stages_per_device, shared() ? " shared" : "");
}

json::Object Topology::json() const {
  json::Object o;
  o.add("devices", devices)
      .add("pipelines", pipelines)
      .add("devices_per_pipeline", devices_per_pipeline)
      .add("stages_per_device", stages_per_device)
      .add("stages", stages);
  if (!stage_copies.empty()) o.add("stage_copies", std::vector<int64_t>(stage_copies.begin(), stage_copies.end()));
  return o;
}

Topology topology_of(const RunPlan& plan) {
  Topology t;
  t.devices = std::max(1, plan.devices());
  t.stages = plan.stages();
  t.pipelines = plan.replicas();
  const StageLayout& layout = plan.layout();
  if (layout.replicated() && !layout.uniform()) t.stage_copies = layout.counts();
  // Replica 0's stages and the devices they sit on.
  std::map<int, int> held;
  const std::vector<int>& placement = plan.placement();
  for (const int stage : plan.replica_view(0)) {
    if (stage >= 0 && stage < static_cast<int>(placement.size())) ++held[placement[static_cast<size_t>(stage)]];
  }
  if (!t.stage_copies.empty()) {
    t.devices_per_pipeline = t.devices;
  } else if (!held.empty()) {
    t.devices_per_pipeline = static_cast<int>(held.size());
  }
  for (const auto& [device, count] : held) t.stages_per_device = std::max(t.stages_per_device, count);
  return t;
}

}  // namespace pipelab
