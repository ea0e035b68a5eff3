#pragma once
/// Weight stashing as a whole (PipeDream, SOSP'19 section 3.3; docs/schemes.md, "1F1B with weight stashing",
/// docs/schemes.md, "spectrain version 2"), shared by PipeDream and by SpecTrain v2's released code. A copy of the
/// weights is kept after every update while any micro-batch may still need it; the update itself always
/// goes to the live (newest) weights.
///
/// Which version a backward reads:
/// - ForwardVersion (the paper): the version its forward used, so forward and backward see
///   the same weights and the gradient is exact for them;
/// - Ring (the released code): the oldest entry of a ring of D - r snapshots, i.e. the live
///   version minus w_r, filled with W_0 at construction and never reset. In steady state this
///   is the forward's version; after an epoch flush the first w_r backwards read versions of
///   the previous epoch (a quirk of the released code, docs/schemes.md, "Quirks").
/// Vertical sync (the paper's option): a forward may use an older version, chosen by the
/// first stage and carried with the activations.
#include <map>
#include <optional>

#include "core/weights/version_stash.h"

namespace pipelab {

class StashedWeights {
 public:
  enum class Backward { ForwardVersion, Ring };
  StashedWeights(Stage& stage, int warmup, Backward mode) : stage_(stage), swap_(stage), warmup_(warmup), mode_(mode) {}

  /// Before a forward of `mb`: uses `version` (or the live weights when negative or live).
  /// Returns the version used.
  int64_t before_forward(int mb, int64_t version = -1);
  void after_forward() { swap_.restore(); }
  /// Before the backward of `mb`: swaps in the version it must read; returns that version.
  int64_t before_backward(int mb);
  void after_backward(int mb);
  /// After an update: stashes the new live version, drops versions nobody needs.
  void after_update();
  /// At a flush: nothing is in flight; the next forwards start from the live version.
  void flush();

  /// The version the forward of in-flight micro-batch `mb` used.
  int64_t forward_version(int mb) const { return forward_version_.at(mb); }
  /// Versions held now (the live one included).
  size_t stored() const { return stash_.size(); }
  c10::IValue state() const;
  void load_state(const c10::IValue& state);

 private:
  void prune();
  int64_t live() const { return stage_.optimizer().steps(); }

  Stage& stage_;
  WeightSwap swap_;
  VersionStash stash_;
  int warmup_;
  Backward mode_;
  std::map<int, int64_t> forward_version_;  ///< in-flight micro-batches
  /// Vertical sync: no future forward asks for a version older than this.
  std::optional<int64_t> next_forward_floor_;
};

}  // namespace pipelab
