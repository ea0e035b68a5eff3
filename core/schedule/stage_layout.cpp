#include "core/schedule/stage_layout.h"

#include <algorithm>

#include "core/util/error.h"

namespace pipelab {

StageLayout::StageLayout(std::vector<int> counts) : counts_(std::move(counts)) {
  PIPELAB_ASSERT(!counts_.empty(), "a stage layout needs at least one position");
  max_ = *std::max_element(counts_.begin(), counts_.end());
  uniform_ = *std::min_element(counts_.begin(), counts_.end()) == max_;
  PIPELAB_ASSERT(*std::min_element(counts_.begin(), counts_.end()) > 0, "every position needs a replica");
  ids_.resize(counts_.size());
  for (int r = 0; r < max_; ++r) {
    for (size_t p = 0; p < counts_.size(); ++p) {
      if (counts_[p] <= r) continue;
      ids_[p].push_back(static_cast<int>(where_.size()));
      where_.push_back({static_cast<int>(p), r});
    }
  }
}

StageLayout StageLayout::uniform(int positions, int replicas) {
  return StageLayout(std::vector<int>(static_cast<size_t>(positions), replicas));
}

int StageLayout::position(int stage) const {
  if (!replicated() || stage < 0 || stage >= stages()) return stage;
  return where_[static_cast<size_t>(stage)].first;
}

int StageLayout::replica(int stage) const {
  if (!replicated() || stage < 0 || stage >= stages()) return 0;
  return where_[static_cast<size_t>(stage)].second;
}

int StageLayout::stage(int position, int replica) const {
  if (!replicated()) return replica == 0 ? position : -1;
  if (position < 0 || static_cast<size_t>(position) >= ids_.size()) return -1;
  const std::vector<int>& ids = ids_[static_cast<size_t>(position)];
  return replica >= 0 && static_cast<size_t>(replica) < ids.size() ? ids[static_cast<size_t>(replica)] : -1;
}

}  // namespace pipelab
