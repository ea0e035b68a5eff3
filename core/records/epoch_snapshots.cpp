/// Each epoch's weights in a pass of several (core/records/epoch_snapshots.h).
#include "core/records/epoch_snapshots.h"

#include <fmt/format.h>

#include "core/records/state_dict.h"

namespace pipelab {

EpochSnapshot::EpochSnapshot(std::string folder, int64_t per_epoch)
    : folder_(std::move(folder)), per_epoch_(per_epoch) {}

std::string EpochSnapshot::path(const std::string& folder, int64_t epoch, int stage) {
  return fmt::format("{}/epoch_{}_stage_{}.pt", folder, epoch, stage);
}

void EpochSnapshot::backward_done(Stage&, int mb) {
  if ((mb + 1) % per_epoch_ == 0) finished_.push_back((mb + 1) / per_epoch_);
}

void EpochSnapshot::after_update(Stage& s) {
  // The epoch ends with the update that applies its last micro-batch's gradient. Counting
  // micro-batches rather than optimizer steps keeps this right for schemes that step once per
  // several micro-batches (pipedream_2bw) and for fp16 updates skipped after an overflow.
  for (const int64_t epoch : finished_) save_tensor_dict(path(folder_, epoch, s.index()), model_state({&s}));
  finished_.clear();
}

EpochSnapshots::EpochSnapshots(std::vector<StageSlot>& slots, const World& world, int stages,
                               const std::string& folder, int64_t per_epoch)
    : slots_(slots) {
  for (int p = 0; p < stages; ++p) {
    for (size_t i = static_cast<size_t>(p); i < slots.size(); i += static_cast<size_t>(stages)) {
      if (!world.runs_stage(static_cast<int>(i))) continue;
      snapshots_.push_back(std::make_unique<EpochSnapshot>(folder, per_epoch));
      slots[i].observers.push_back(snapshots_.back().get());
      observed_.push_back(i);
      break;
    }
  }
}

EpochSnapshots::~EpochSnapshots() {
  for (const size_t i : observed_) slots_[i].observers.pop_back();
}

}  // namespace pipelab
