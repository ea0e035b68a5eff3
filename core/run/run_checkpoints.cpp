/// A run's checkpoints and resume (core/run/run_checkpoints.h).
#include "core/run/run_checkpoints.h"

#include <filesystem>
#include <iostream>

#include "core/assembly/run_parts.h"
#include "core/io/safetensors.h"
#include "core/records/resume_point.h"
#include "core/records/state_dict.h"

namespace pipelab {

RunCheckpoints::RunCheckpoints(const Experiment& experiment, RunParts& parts, RunRecord& record)
    : e_(experiment), parts_(parts), record_(record) {}

HeldStages RunCheckpoints::own_stages() const {
  const World& world = e_.executor->world();
  HeldStages out;
  for (size_t i = 0; i < parts_.stages.size(); ++i) {
    if (!world.runs_stage(static_cast<int>(i))) continue;
    out.ids.push_back(static_cast<int>(i));
    out.stages.push_back(parts_.stages[i].get());
    out.policies.push_back(parts_.policies[i].get());
  }
  return out;
}

TrainingProgress RunCheckpoints::open(const YAML::Node& config, bool resume, bool overwrite, bool quiet) {
  TrainingProgress progress;
  // A pass of several epochs has no epoch boundary to resume from: it restarts. Otherwise
  // each process restores its own stages, from the newest epoch all of them hold.
  const bool resumable = parts_.plan.epochs_per_pass(e_.run.epochs) == 1;
  if (resume && resumable && agree_resume_epoch(e_.executor->world(), record_.state_path()) > 0) {
    progress = load_training_state(record_.state_path(), own_stages(), parts_.codecs.get());
    record_.resume(config, progress.epochs_done);
    if (!quiet) std::cout << fmt::format("resuming {} after epoch {}\n", record_.dir(), progress.epochs_done);
  } else {
    record_.begin(config, overwrite || resume);
  }
  return progress;
}

void RunCheckpoints::save_weights(const std::string& name) {
  // In a multi-process run the writing process first collects every stage's weights.
  e_.executor->world().gather_weights(parts_.slots);
  if (record_.is_log_only()) return;
  // Replicas of the pipeline hold the same weights: the checkpoint is replica 0's model.
  const TensorDict weights = model_state(parts_.replica_stages(0));
  if (e_.run.checkpoint_format == RunOptions::CheckpointFormat::Safetensors) {
    save_safetensors(record_.checkpoint_path(name + ".safetensors"), weights, {{"format", "pt"}});
  } else {
    save_tensor_dict(record_.checkpoint_path(name + ".pt"), weights);
  }
}

void RunCheckpoints::save_state(const TrainingProgress& progress) {
  // Every process its own stages (core/records/resume_point.h).
  const HeldStages own = own_stages();
  save_state_keeping_previous(record_.state_path(), [&](const std::string& path) {
    save_training_state(path, progress, own, parts_.codecs.get());
  });
}

std::unique_ptr<EpochSnapshots> RunCheckpoints::watch_epochs(int64_t per_epoch) {
  std::filesystem::create_directories(snapshot_folder());
  return std::make_unique<EpochSnapshots>(parts_.slots, e_.executor->world(), parts_.plan.stages(), snapshot_folder(),
                                          per_epoch);
}

void RunCheckpoints::load_epoch(int epoch, bool last) {
  // One replica of each stage this process runs saved it; every replica here takes it.
  for (size_t i = 0; i < parts_.stages.size(); ++i) {
    if (!e_.executor->world().runs_stage(static_cast<int>(i))) continue;
    Stage* s = parts_.stages[i].get();
    const std::string path = EpochSnapshot::path(snapshot_folder(), epoch, s->index());
    load_model_state({s}, load_tensor_dict(path), true, path);
  }
  for (int p = 0; p < parts_.plan.stages(); ++p) std::filesystem::remove(EpochSnapshot::path(snapshot_folder(), epoch, p));
  if (last) std::filesystem::remove_all(snapshot_folder());
}

}  // namespace pipelab
