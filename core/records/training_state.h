#pragma once
/// The training-state checkpoint written after every epoch (checkpoints/state.pt): all a
/// run needs to continue after an interruption and end with the same bytes as if it had
/// never stopped. It is a plain .pt dict, so Python's torch.load reads it too:
///   {format, epochs_done, global_step,
///    stages: [{model: state dict, optimizer_steps, optimizer: {name: tensor}, generators: [tensor],
///              policy, codecs: {stream: state}}],
///    history: [{epoch, train_loss, ...}], clock, clock_step_seconds}
#include <string>
#include <vector>

#include "core/compress/compression.h"
#include "core/records/run_record.h"
#include "core/scheme/scheme.h"

namespace pipelab {

struct TrainingProgress {
  int epochs_done = 0;
  int64_t global_step = 0;
  std::vector<EpochMetrics> history;
  /// The simulated clock the run's steps are timed by (`run --cluster`): what it simulates
  /// and its step, 0 without one. A resumed run keeps it (one clock per run).
  std::string clock;
  double clock_step_seconds = 0;
};

/// The stages one process holds, with their policies and their ids in the run (a replica's
/// stages share positions with replica 0's, so the codecs' stream ends go by id).
struct HeldStages {
  std::vector<int> ids;
  std::vector<Stage*> stages;
  std::vector<StagePolicy*> policies;
};

/// Writes the state of `held` (their policies, and the ends of the boundary codecs' streams
/// they hold, when `codecs` is given) after `progress` to `path`, atomically.
void save_training_state(const std::string& path, const TrainingProgress& progress, const HeldStages& held,
                         BoundaryCodecs* codecs = nullptr);

/// The epochs finished when `path` was saved; -1 when there is no such file.
int saved_epochs(const std::string& path);

/// Restores what save_training_state wrote into `held`; returns the progress.
TrainingProgress load_training_state(const std::string& path, const HeldStages& held, BoundaryCodecs* codecs = nullptr);

}  // namespace pipelab
