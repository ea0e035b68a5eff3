#pragma once
/// Cutting a model's blocks into D consecutive stages: `balance: [n1, n2, ...]` (blocks per
/// stage), `balance: auto` (by parameter count for now) or a model's named split.
#include <string>
#include <vector>

#include "core/config/fields.h"

namespace pipelab {

/// `auto`, a list of block counts, or the name of a split the model defines.
struct Balance {
  enum class Kind { Auto, Counts, Named } kind = Kind::Auto;
  std::vector<int> counts;
  std::string name;
};

template <>
struct ConfigValue<Balance> {
  static std::string type() { return "auto, a list of blocks per stage, or a named split"; }
  static Balance read(const ConfigNode& n);
  static YAML::Node write(const Balance& b);
};

/// The `partition:` section.
struct PartitionOptions {
  int stages = 1;
  Balance balance;
  template <class V>
  void fields(V& v) {
    v("stages", stages, "number of pipeline stages D", positive);
    v("balance", balance, "blocks per stage: auto (by parameters), [n1, n2, ...], or a named split");
  }
};

/// Contiguous split of `weights` into `parts` non-empty groups minimising the largest group
/// sum (ties: earlier cuts). Requires weights.size() >= parts.
std::vector<int> balance_by_weight(const std::vector<double>& weights, int parts);

/// Blocks per stage for `stages` stages of a model with `block_names`/`block_params`.
/// Problems are ConfigErrors at `partition.balance` of `source`.
std::vector<int> resolve_balance(const Balance& balance, int stages,
                                 const std::vector<int64_t>& block_params,
                                 const std::map<std::string, std::vector<int>>& named,
                                 const ConfigSource& source);

}  // namespace pipelab
