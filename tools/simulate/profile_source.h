#pragma once
/// A model's profile for derived costs (per block: FLOPs, parameters, the tensors it sends,
/// the bytes it keeps and raises): from shapes on the meta device by default
/// (core/model/meta_device.h: seconds and no memory, whatever the model's size), measured on
/// this CPU when asked or when the model calls an operator the meta device cannot run, and
/// cached on disk by what determines it (docs/plan.md, "Profiles").
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/optim/optimizer.h"
#include "tools/describe/model_profile.h"
#include "tools/simulate/cache_key.h"  // cache_folder(): profiles live in its profiles/ folder
#include "tools/simulate/derive.h"
#include "tools/simulate/shape_autocast.h"

namespace pipelab::sim {

enum class ProfileWay { Shapes, Measured };

struct ModelProfile {
  std::vector<BlockProfile> blocks;
  BlockMemory memory;
  bool from_shapes = false;
  /// Why it was measured although shapes were asked for (the operator the meta device lacks).
  std::string measured_because;
  bool cached = false;  ///< read from the cache
  /// In a report's header: "from shapes (meta device)", "measured on this CPU: ...".
  std::string describe() const;
};

/// The profile of `def` for data `data` (blocks seeded from `seed`; `optimizer`'s update
/// rises); `cache_key` (profile_cache_key) names its cache entry, "" for none. Shows a
/// progress line on stderr when `progress`. With `amp`, the blocks' bytes are measured under
/// the run's autocast (measure_block_memory).
ModelProfile profile_model(const ModelDef& def, const DataSpec& data, uint64_t seed, const OptimizerFactory* optimizer,
                           ProfileWay way, const std::string& cache_key, bool progress = true,
                           const AutocastSpec* amp = nullptr);

/// A hex digest of everything a profile depends on: the model's type and resolved options,
/// the files they name (size and modification time), the data's shapes, the seed, the
/// optimizer's options, the way and the autocast; plus this format's version and this build of
/// pipelab (a model's code may change while its options stay; a plugin's library is not in it).
std::string profile_cache_key(const std::string& model_type, const YAML::Node& model_options, const DataSpec& data,
                              uint64_t seed, const YAML::Node& optimizer_options, ProfileWay way,
                              const AutocastSpec* amp = nullptr);

}  // namespace pipelab::sim
