#include "core/weights/stashed_weights.h"

#include <algorithm>

namespace pipelab {

int64_t StashedWeights::before_forward(int mb, int64_t version) {
  stash_.keep_live(stage_);
  const int64_t v = version < 0 ? live() : version;
  if (v != live()) swap_.swap_in(stash_.get(v));
  forward_version_[mb] = v;
  if (version >= 0) next_forward_floor_ = v;  // vertical sync: later forwards never go back
  return v;
}

int64_t StashedWeights::before_backward(int mb) {
  const int64_t v = mode_ == Backward::Ring ? std::max<int64_t>(0, live() - warmup_) : forward_version_.at(mb);
  if (v != live()) swap_.swap_in(stash_.get(v));
  return v;
}

void StashedWeights::after_backward(int mb) {
  swap_.restore();
  forward_version_.erase(mb);
}

void StashedWeights::after_update() {
  stash_.keep_live(stage_);
  prune();
}

void StashedWeights::flush() {
  if (next_forward_floor_) next_forward_floor_ = live();
  prune();
}

void StashedWeights::prune() {
  int64_t oldest = live();
  if (mode_ == Backward::Ring) {
    oldest = std::max<int64_t>(0, live() - warmup_);
  } else {
    if (next_forward_floor_) oldest = std::min(oldest, *next_forward_floor_);
    for (const auto& [mb, v] : forward_version_) oldest = std::min(oldest, v);
  }
  stash_.drop_before(oldest);
}

c10::IValue StashedWeights::state() const {
  // Only the ring carries versions across an epoch flush; the paper's stash is empty then.
  return mode_ == Backward::Ring ? stash_.state() : c10::IValue();
}

void StashedWeights::load_state(const c10::IValue& state) { stash_.load_state(stage_, state); }

}  // namespace pipelab
