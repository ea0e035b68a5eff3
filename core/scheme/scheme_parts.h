#pragma once
/// The parts a scheme may add to its schedule program, for what only some schemes have
/// (docs/design.md, "The one idea"): how copies of its pipeline are laid out, and what it adds
/// to each stage. A scheme returns them from Scheme::topology() and Scheme::add_ons(); the run
/// plan and the runner call every part the same way for every scheme and never ask which
/// scheme is running.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/scheme/gradient_route.h"
#include "core/schedule/schedule.h"
#include "core/stage/stage.h"

namespace pipelab {

/// How a scheme's copies of the pipeline are laid out (partition.replicas;
/// core/scheme/replicas.h). The default: each copy runs the scheme's own schedule on devices
/// of its own, starts from the same weights, and PipeDream's replicated stages are refused.
class ReplicaTopology {
 public:
  virtual ~ReplicaTopology() = default;
  /// Copies that share devices and run as one schedule (Chimera's two pipelines in opposite
  /// directions): that schedule of units.size() copies, copy r running units[r] micro-batches
  /// (stages and micro-batches numbered as core/schedule/replicate.h numbers them). Empty:
  /// each copy runs the scheme's own schedule.
  virtual Schedule joint_schedule(int /*stages*/, const std::vector<int>& /*units*/) const { return {}; }
  /// The device of every copy's stages with a joint schedule (empty: devices of their own).
  virtual std::vector<int> joint_placement(int /*stages*/, int /*replicas*/) const { return {}; }
  /// The seed copy `replica` draws its initial weights from under run seed `seed`. The
  /// default, the run's own, starts every copy from the same weights (what a broadcast
  /// would give); a fidelity flag may draw them apart (Chimera's reference runtime).
  virtual uint64_t replica_seed(int /*replica*/, uint64_t seed) const { return seed; }
  /// Why `scheme` cannot run PipeDream's replicated stages (`partition.replicas: [2, 1, 1]`:
  /// stage p on counts[p] devices, mini-batches dealt round robin, its 1F1B-RR;
  /// core/schedule/generators.h); "" when it can. PipeDream defines them for its own 1F1B
  /// with weight stashing, so the default refuses.
  virtual std::string replicated_stages_refused(const std::string& scheme) const;
};

/// What a scheme adds to each of its stages. The default adds nothing: end-to-end backprop.
class StageAddOns {
 public:
  virtual ~StageAddOns() = default;
  /// Whether prepare() adds anything (it is given each stage's output shape, which costs a
  /// dry forward).
  virtual bool prepares() const { return false; }
  /// Adds to a freshly built stage, before its optimizer is made (an auxiliary head: its
  /// parameters then belong to the stage's optimizer). `output_shape` is one example's
  /// output of the stage; `data` what the targets are.
  virtual void prepare(Stage& /*stage*/, const std::vector<int64_t>& /*output_shape*/, const DataSpec& /*data*/) const {}
  /// The gradient route of `stage` (what B and H compute); null for end-to-end backprop.
  virtual std::unique_ptr<GradientRoute> route(Stage& /*stage*/) const { return nullptr; }
  /// True when route() returns routes that call autograd themselves, so fp16's per-stage
  /// loss scaling cannot reach them and a trace draws no gradient arrows between stages.
  virtual bool routes_own_gradients() const { return false; }
};

/// The defaults, shared.
std::shared_ptr<const ReplicaTopology> default_topology();
std::shared_ptr<const StageAddOns> no_add_ons();

}  // namespace pipelab
