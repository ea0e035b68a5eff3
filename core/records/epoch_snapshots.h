#pragma once
/// The weights of each epoch of a pass that trains several before they are evaluated (a
/// pipeline never flushed: `flush: never`). The epochs of such a pass flow through one
/// pipeline that is drained only at its end, so the warm-up of epoch e+1 overlaps the drain of
/// epoch e. "The model after epoch e" is, at each stage, the weights right after the update
/// that applies the gradient of epoch e's last micro-batch there (stages reach it at
/// different times). Each stage saves those weights then, from its own thread or process (so
/// this works on every executor, into its own process's folder); after the pass every epoch
/// is evaluated on them, each process loading its own stages'.
#include <cstdint>
#include <string>
#include <vector>

#include <memory>

#include "core/exec/executor.h"
#include "core/exec/observer.h"
#include "core/exec/world.h"

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

/// One EpochSnapshot observer per pipeline stage, on the first of its replicas that this
/// process runs (every replica of a stage holds the same weights after an update, and replica
/// 0 evaluates): each process keeps the snapshots of its own stages in its own folder, and
/// loads them from there. Detached however the pass ends.
class EpochSnapshots {
 public:
  EpochSnapshots(std::vector<StageSlot>& slots, const World& world, int stages, const std::string& folder,
                 int64_t per_epoch);
  ~EpochSnapshots();
  EpochSnapshots(const EpochSnapshots&) = delete;
  EpochSnapshots& operator=(const EpochSnapshots&) = delete;

 private:
  std::vector<StageSlot>& slots_;
  std::vector<std::unique_ptr<EpochSnapshot>> snapshots_;
  std::vector<size_t> observed_;
};

}  // namespace pipelab
