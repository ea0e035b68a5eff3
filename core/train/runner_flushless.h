#pragma once
/// The observer of `flush: never` runs (core/train/runner_flushless.cpp) that saves each
/// stage's weights at its epoch's end.
#include <cstdint>
#include <string>
#include <vector>

#include "core/exec/observer.h"

namespace pipelab {

/// Watches one flushless run (an ActionObserver of every stage): after the update that
/// applies the gradient of an epoch's last micro-batch, the stage's weights are saved as "the
/// model after that epoch". It only observes, so every hook of the scheme's policy runs as
/// in any other run (a wrapper once lost a scheme's own gradient route this way).
class EpochSnapshot final : public ActionObserver {
 public:
  /// Snapshots go to `folder`; an epoch is `per_epoch` micro-batches (run units).
  EpochSnapshot(std::string folder, int64_t per_epoch);

  void backward_done(Stage& s, int mb) override;
  void after_update(Stage& s) override;

  /// Where stage `stage`'s weights after epoch `epoch` (1-based) are saved.
  static std::string path(const std::string& folder, int64_t epoch, int stage);

 private:
  std::string folder_;
  int64_t per_epoch_;
  /// Epochs whose last micro-batch finished its backward here since the last update.
  std::vector<int64_t> finished_;
};

}  // namespace pipelab
