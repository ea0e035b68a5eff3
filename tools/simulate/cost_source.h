#pragma once
/// Where `simulate`, `plan` and `run --cluster` take their costs from: a costs file (a run's
/// metrics/costs.json, or one written by hand), or the model profiled once and cut per stage
/// count, with the tied weights each stage shares with another (the ALLREDUCE before each
/// update). The command-line flags that choose them are tools/cli/cost_flags.h's.
#include <optional>
#include <string>
#include <vector>

#include "core/experiment/experiment.h"
#include "core/model/block_costs.h"
#include "core/plan/run_plan.h"
#include "tools/simulate/block_times.h"
#include "tools/simulate/cost_validation.h"
#include "tools/simulate/costs.h"
#include "tools/simulate/derive.h"
#include "tools/simulate/profile_source.h"
#include "tools/simulate/shape_autocast.h"

namespace pipelab::sim {

/// Link figures given beside a costs file, which replace the file's (unset: the file's).
struct LinkOverrides {
  std::optional<double> gbps, latency_us, host_gbps, host_latency_us, overlap_slowdown;
  void apply(LinkSpec& link) const;
};

/// What a CostSource is built from besides the experiment and its model.
struct CostSourceOptions {
  std::string costs_file;  ///< "": derive the costs from the model
  DeviceSpec device;       ///< the device derived costs are for
  LinkOverrides link;      ///< with a costs file: the link figures given beside it
  bool preset = false;     ///< the cluster is a shipped preset (its classes are not a calibration)
  bool time_blocks = false;  ///< time each block on this machine
  ProfileWay way = ProfileWay::Shapes;
  std::optional<AutocastSpec> autocast;  ///< the autocast the stages compute under
  bool progress = true;    ///< a progress line while profiling
};

/// State tensors per parameter of the file's optimizer (SGD 0, with momentum 1, Adam 2),
/// measured: one step on a tensor of 4096 values, whatever the optimizer is.
double optimizer_states(const OptimizerFactory& factory);

/// Costs measured with copies of stages list every copy: one pipeline's are what a replay of
/// `plan` takes.
void keep_one_pipeline(SimCosts& costs, const RunPlan& plan);

/// Costs from a file, or the model profiled once and cut per stage count.
class CostSource {
 public:
  /// `def` and `spec`: the experiment's model as defined for its data's shapes.
  CostSource(const Experiment& e, const ModelDef& def, const DataSpec& spec, const CostSourceOptions& options);

  bool derived() const { return !file_; }
  /// Tokens per example of the costs (0: not sequences, or unknown).
  double sequence_length() const { return file_ ? file_->sequence_length : sequence_length_; }
  bool timed() const { return !times_.empty(); }
  /// Which costs these are: what the validation figure beside them is of.
  CostKind kind() const;
  /// The line a report prints under its costs: how far costs of this kind were found from
  /// measured runs (tools/simulate/cost_validation.h).
  std::string checked() const;
  /// What the costs are, for a report's header.
  std::string describe(const std::string& dtype) const;
  /// The device memory's bandwidth in a header: no figure is no bound, not 0 GB/s.
  static std::string memory_text(double gbs);
  /// other_model()'s verdict on the costs file given ("" without one, or when it matches).
  const std::string& costs_of_other_model() const { return other_model_; }
  const std::optional<SimCosts>& file() const { return file_; }
  const BlockMemory& memory() const { return profile_.memory; }

  /// Costs of `stages` stages for units of `examples` examples.
  SimCosts costs(int stages, double examples) const;
  /// Costs of the stages `balance` cuts (blocks per stage) for units of `examples` examples,
  /// the file's compression section on their boundaries; a costs file's own partition
  /// whatever `balance` says.
  SimCosts costs_for(const std::vector<int>& balance, double examples) const;
  /// The same with `compression` on the boundaries instead (the planner's codec candidates).
  SimCosts costs_for(const std::vector<int>& balance, double examples, const CompressionSection& compression) const;
  /// The link between devices: the costs file's (unless a flag replaced it), or the flags'.
  const LinkSpec& link() const { return file_ ? file_->link : device_.link; }
  /// Each block's forward FLOPs per example (derived costs; empty with a costs file).
  std::vector<double> block_flops() const;

  /// A tie between two blocks' parameters: the blocks and the tensor's elements.
  struct BlockTie {
    size_t first = 0, second = 0;
    int64_t elements = 0;
  };

 private:
  void load_file(const ModelDef& def, const DataSpec& spec, const CostSourceOptions& options);
  void profile(const ModelDef& def, const DataSpec& spec, const CostSourceOptions& options);
  std::string describe_timed() const;
  void add_tied_bytes(SimCosts& c, const std::vector<int>& balance) const;

  const Experiment& e_;
  DeviceSpec device_;
  bool preset_ = false;
  std::optional<SimCosts> file_;
  std::string other_model_;
  ModelProfile profile_;
  BlockTimes times_;
  int small_ = 0, large_ = 0;  ///< the two sizes blocks were timed at
  double sequence_length_ = 0;  ///< tokens per example (0: not sequences)
  std::vector<BlockTie> ties_;
};

}  // namespace pipelab::sim
