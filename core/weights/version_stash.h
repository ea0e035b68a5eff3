#pragma once
/// Weight stashing (PipeDream, SOSP'19 section 3.3; docs/schemes.md, "1F1B with weight stashing"): copies of a stage's
/// weights by version, where version k = the weights after k updates of this stage. A copy
/// is taken after every update (and at the start), and dropped once no micro-batch can
/// still ask for it.
#include <ATen/core/ivalue.h>

#include <map>

#include "core/weights/weights.h"

namespace pipelab {

class VersionStash {
 public:
  /// Stores the stage's live weights as version `stage.optimizer().steps()` (if new).
  void keep_live(Stage& stage);
  bool has(int64_t version) const { return versions_.count(version) > 0; }
  const Weights& get(int64_t version) const;
  /// Drops every version older than `oldest`.
  void drop_before(int64_t oldest);
  /// Stored versions, the live one included.
  size_t size() const { return versions_.size(); }
  int64_t oldest() const { return versions_.empty() ? -1 : versions_.begin()->first; }

  /// For training-state checkpoints: {"<version>": [tensors]}.
  c10::IValue state() const;
  void load_state(Stage& stage, const c10::IValue& state);

 private:
  std::map<int64_t, Weights> versions_;
};

}  // namespace pipelab
