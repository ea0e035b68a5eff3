#pragma once
/// Where a run's stages sit, in the one vocabulary every command uses (docs/plan.md,
/// "Topology"): devices in all; pipelines (copies of the whole pipeline, each training on its
/// share of every mini-batch: data parallelism over pipelines); devices a pipeline; stages a
/// device (virtual stages: an interleaved or V-shaped schedule puts several of a pipeline's
/// stages on one device); and one pipeline's stages, which is their product. Megatron-LM
/// calls the three factors dp, pp and vpp. PipeDream's replicated stages (copies of single
/// stages, SOSP'19's "2-1-1") are one pipeline whose stages have their own copy counts.
///
/// Read from the compiled plan's placement (core/plan/run_plan.h), never from a scheme's
/// options, so `plan`, `simulate`, `describe`, `schedule` and a run's summary say the same.
#include <string>
#include <vector>

#include "core/io/json.h"

namespace pipelab {

class RunPlan;

struct Topology {
  int devices = 1;               ///< devices in all
  int pipelines = 1;             ///< copies of the whole pipeline (partition.replicas; Megatron's dp)
  int devices_per_pipeline = 1;  ///< Megatron's pp
  int stages_per_device = 1;     ///< the most stages one device of a pipeline holds (Megatron's vpp)
  int stages = 1;                ///< one pipeline's stages (partition.stages)
  /// PipeDream's replicated stages: each stage's copies; empty for whole pipelines.
  std::vector<int> stage_copies;

  /// "8 devices (2 pipelines of 4 devices, 4 stages a device, 16 stages a pipeline)".
  std::string text() const;
  /// The same for a table cell: "2 x 4 x 4" (pipelines x devices a pipeline x stages a
  /// device; "2 x 4 x 1 shared" when the pipelines share their devices), or the copies of
  /// each stage ("copies 2-1-1").
  std::string cell() const;
  /// Whether the pipelines share their devices (Chimera's down and up pipelines, each over
  /// every device) rather than each having its own.
  bool shared() const { return stage_copies.empty() && pipelines * devices_per_pipeline > devices; }
  /// {"devices", "pipelines", "devices_per_pipeline", "stages_per_device", "stages"} and,
  /// with replicated stages, "stage_copies".
  json::Object json() const;
};

/// The header of a table column whose cells are Topology::cell().
inline constexpr const char* kTopologyColumn = "pipelines x devices x stages a device";

Topology topology_of(const RunPlan& plan);

}  // namespace pipelab
