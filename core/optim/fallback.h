#pragma once
/// The parameters an optimizer leaves to another one: Muon's that are not matrices, basis
/// rotation's that it does not rotate (embeddings, the head, biases, norms). The other is an
/// optimizer section nested in this one's options (`fallback: {type: adamw, lr: 3.0e-4}`); it
/// steps once per step over its parameters, its learning rate following the schedule in
/// proportion, its state saved under the stage's parameter indices (docs/schemes.md, "Muon").
#include <ATen/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/optim/optimizer.h"

namespace pipelab {

/// Another optimizer's section, nested in this one's options.
struct OptimizerSection {
  std::shared_ptr<const OptimizerFactory> factory;
};

template <>
struct ConfigValue<OptimizerSection> {
  static std::string type() { return "an optimizer section like {type: adamw, lr: 3.0e-4}"; }
  static OptimizerSection read(const ConfigNode& n) { return {Registry<OptimizerFactory>::get().create(n)}; }
  static YAML::Node write(const OptimizerSection& v) { return v.factory->resolved(); }
};

/// "3" or "64 x 3 x 3 x 3".
std::string shape_text(const at::Tensor& t);

class Fallback {
 public:
  /// Parameters `params` whose `mine[i]` is false go to `section`'s optimizer. Without a
  /// section and with such parameters, a ConfigError at `owner`'s `fallback` key says `why`
  /// (what the owner updates) and how to add one.
  Fallback(const std::vector<at::Tensor>& params, const std::vector<bool>& mine,
           const std::optional<OptimizerSection>& section, const Component& owner, const std::string& why);

  /// Whether parameter i is the fallback's.
  bool owns(size_t i) const { return index_.at(i) >= 0; }
  /// Its direction for parameter i (owns(i)).
  at::Tensor direction(size_t i, const DirectionRequest& request) const;
  /// Its state under the stage's parameter indices, appended to `out`.
  void append_state(std::vector<std::pair<std::string, at::Tensor>>& out) const;
  /// Restores its part of `state` (entries of parameters it owns).
  void load_state(const std::vector<std::pair<std::string, at::Tensor>>& state);
  /// Its update count: the owner's (a resume sets both, so that Adam's bias correction in a
  /// predictor's direction reads the same count as in the uninterrupted run).
  void set_steps(int64_t steps);
  /// One step over its parameters: base lr x (`lr` / `owner_base_lr`), the owner's step count
  /// (Adam's bias correction reads it: one optimizer over the stage, the same on resume).
  void step(double lr, double owner_base_lr, int64_t steps);

 private:
  std::vector<int> index_;  ///< per stage parameter, its index in the fallback's, -1 when not its
  std::optional<OptimizerSection> section_;
  std::unique_ptr<Optimizer> optimizer_;
};

}  // namespace pipelab
