#include "core/scheme/staleness.h"

namespace pipelab {

void StalenessRecorder::backward(const Stage& stage, int mb, int64_t version) {
  Stage& s = const_cast<Stage&>(stage);
  const int64_t live = s.optimizer().steps();
  auto it = forward_.find(mb);
  PIPELAB_ASSERT(it != forward_.end(), "stage {}: backward of micro-batch {} without a recorded forward", stage.index(), mb);
  rows_.push_back({live, "forward_gap", static_cast<double>(live - it->second)});
  rows_.push_back({live, "backward_gap", static_cast<double>(live - version)});
  forward_.erase(it);
}

void StalenessRecorder::add(const Stage& stage, const std::string& name, double value) {
  rows_.push_back({const_cast<Stage&>(stage).optimizer().steps(), name, value});
}

void StalenessRecorder::collect(std::vector<StageMetric>& out) {
  out.insert(out.end(), rows_.begin(), rows_.end());
  rows_.clear();
}

}  // namespace pipelab
