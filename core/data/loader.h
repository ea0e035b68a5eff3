#pragma once
/// Turns a dataset into the mini-batches of each epoch: a seeded permutation per epoch
/// (the same for a given seed and epoch, whatever ran before), fixed-size batches, and
/// the last partial batch dropped in training (as the reference code does, §6.1).
#include <memory>
#include <vector>

#include "core/data/dataset.h"

namespace pipelab {

struct LoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = true;
  bool drop_last = true;
  uint64_t seed = 0;
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<Dataset> dataset, LoaderOptions options);
  /// Batches per epoch.
  int64_t batches() const;
  int64_t examples() const { return dataset_->size(); }
  /// Fixes the order of epoch `epoch`.
  void start_epoch(int epoch);
  /// Batch j of the current epoch.
  Batch batch(int64_t j) const;
  /// Seconds spent producing batches since the last call (a training step's data wait).
  double take_wait_seconds();

 private:
  std::shared_ptr<Dataset> dataset_;
  LoaderOptions options_;
  int epoch_ = 0;
  std::vector<int64_t> order_;
  mutable double wait_seconds_ = 0;
};

}  // namespace pipelab
