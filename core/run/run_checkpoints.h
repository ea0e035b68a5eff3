#pragma once
/// A run's checkpoints and resume: the model's weights (checkpoints/<name>.pt or
/// .safetensors), the training state every process saves after each epoch
/// (checkpoints/state.pt, core/records/resume_point.h) and restores on --resume, and the
/// weights each epoch of a pass of several ends with (core/records/epoch_snapshots.h).
#include <memory>
#include <string>

#include "core/experiment/experiment.h"
#include "core/records/epoch_snapshots.h"
#include "core/records/run_record.h"
#include "core/records/training_state.h"

namespace pipelab {

struct RunParts;

class RunCheckpoints {
 public:
  RunCheckpoints(const Experiment& experiment, RunParts& parts, RunRecord& record);

  /// Begins the run's records, or with `resume` continues an interrupted run's from the
  /// state every process holds (when its passes are one epoch each: a run never flushed
  /// restarts); returns where training stands. `config`: the resolved configuration.
  TrainingProgress open(const YAML::Node& config, bool resume, bool overwrite, bool quiet);
  /// The model's weights (replica 0's) as checkpoints/<name>.pt or .safetensors
  /// (run.checkpoint_format); in a multi-process run the writer first gathers every stage's.
  void save_weights(const std::string& name);
  /// Every process's own stages, policies and codecs after the epoch `progress` counts.
  void save_state(const TrainingProgress& progress);
  /// Saves each stage's weights at the end of every epoch of a pass of `per_epoch`
  /// mini-batches per epoch, while the returned guard lives.
  std::unique_ptr<EpochSnapshots> watch_epochs(int64_t per_epoch);
  /// Loads the weights each stage this process runs had at the end of the pass's epoch
  /// `epoch` (1-based), and removes them; `last`: the pass's last, whose folder goes too.
  void load_epoch(int epoch, bool last);

 private:
  std::string snapshot_folder() const { return record_.checkpoint_path("flushless"); }
  /// The stages this process runs, and their policies: what its training state holds.
  HeldStages own_stages() const;

  const Experiment& e_;
  RunParts& parts_;
  RunRecord& record_;
};

}  // namespace pipelab
