#pragma once
/// metrics/costs.json: what one stage of a traced run costs, measured — mean action times,
/// message sizes, host memory (MemoryMeter) and the sizes of weights and optimizer state —
/// in the form `pipelab simulate` reads back as a cost model (docs/design.md, "Runner and
/// records"; docs/results.md, for every key and unit).
#include <ATen/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/exec/executor.h"
#include "core/plan/topology.h"

namespace pipelab {

/// What costs.json needs besides ExecStats: the run's identity and per-stage sizes.
struct StageCostInputs {
  std::string executor, scheme, dtype;
  int micro_batches = 1;         ///< per mini-batch (Scheme::micro_batches)
  double micro_batch_size = 0;   ///< examples per micro-batch
  int segments = 1;              ///< sequence segments per micro-batch (the plan's split)
  int64_t sequence_length = 0;   ///< tokens per example (0: not sequences)
  /// Ragged text (dataset.collate pad or pack): the micro-batches differed in length, and the
  /// figures are their means.
  bool ragged = false;
  double step_seconds = 0;       ///< mean wall seconds of one mini-batch
  int64_t steps = 0;             ///< executor runs timed for step_seconds
  std::vector<int> placement;    ///< the device of each stage
  Topology topology;             ///< where the stages sat, in every command's words
  std::vector<int64_t> parameter_bytes, buffer_bytes, optimizer_bytes;
  /// Per stage, the bytes of its parameters tied to another stage's.
  std::vector<int64_t> tied_bytes;
  std::vector<double> stored_versions;
  /// The run's `compression:` section in YAML's flow form ("" without one): the message
  /// sizes and codec times are then the encoded ones.
  std::string compression;
  /// Per stage, its GPU's caching-allocator peaks (device::allocator_peak; empty or 0 on
  /// the CPU), so that a simulation can be checked against what the device held.
  std::vector<int64_t> cuda_allocated_peak_bytes, cuda_reserved_peak_bytes;
  std::vector<int> cuda_device;  ///< per stage, its GPU's index (-1 on the CPU)
};

/// costs.json's text for the traced `stats` (merged over processes) and `in`.
std::string stage_costs_json(const ExecStats& stats, const StageCostInputs& in);

/// The sum of the tensors' nbytes (undefined tensors count 0).
int64_t tensor_bytes(const std::vector<at::Tensor>& tensors);

/// Per stage (0..stages-1), the last value of `metric` in a metrics/stages.csv file
/// (epoch,step,stage,metric,value), or `fallback` where the stage never reported it.
std::vector<double> last_stage_metric(const std::string& stages_csv, const std::string& metric, int stages,
                                      double fallback);

}  // namespace pipelab
