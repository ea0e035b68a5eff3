#include "core/records/training_state.h"

#include <cmath>

#include <filesystem>

#include "core/io/pt_file.h"
#include "core/records/state_dict.h"

namespace pipelab {
namespace {

constexpr const char* kFormat = "pipelab-training-state-2";

c10::impl::GenericDict dict() { return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()); }

c10::IValue tensors(const std::vector<at::Tensor>& ts) {
  c10::impl::GenericList list(c10::AnyType::get());
  for (const at::Tensor& t : ts) list.push_back(t);
  return list;
}

c10::IValue named(const std::vector<std::pair<std::string, at::Tensor>>& ts) {
  c10::impl::GenericDict d = dict();
  for (const auto& [k, v] : ts) d.insert(k, v.detach().to(at::kCPU));
  return d;
}

/// Looks up `key`, failing with a message that names the file.
c10::IValue at_key(const c10::impl::GenericDict& d, const std::string& key, const std::string& path) {
  const auto it = d.find(key);
  if (it == d.end()) {
    throw UserError(fmt::format("{}: not a pipelab training state (no '{}'). Fix: delete it to restart the run.", path, key));
  }
  return it->value();
}

}  // namespace

void save_training_state(const std::string& path, const TrainingProgress& progress, const HeldStages& held,
                         BoundaryCodecs* codecs) {
  const std::vector<Stage*>& stages = held.stages;
  const std::vector<StagePolicy*>& policies = held.policies;
  c10::impl::GenericDict root = dict();
  root.insert("format", std::string(kFormat));
  root.insert("epochs_done", static_cast<int64_t>(progress.epochs_done));
  root.insert("global_step", progress.global_step);
  c10::impl::GenericList per_stage(c10::AnyType::get());
  for (size_t r = 0; r < stages.size(); ++r) {
    c10::impl::GenericDict s = dict();
    // Per stage: data-parallel replicas share names but not batch-norm statistics.
    s.insert("model", to_ivalue(model_state({stages[r]})));
    s.insert("optimizer_steps", stages[r]->optimizer().steps());
    s.insert("optimizer", named(stages[r]->optimizer().state()));
    s.insert("optimizer_last_gradients", named(stages[r]->optimizer().last_gradients()));
    s.insert("generators", tensors(stages[r]->rng_states()));
    s.insert("policy", policies[r]->state());
    if (const LossScaler* scaler = stages[r]->loss_scaler()) s.insert("loss_scaler", scaler->state());
    if (codecs) s.insert("codecs", codecs->state(held.ids[r]));
    per_stage.push_back(s);
  }
  root.insert("stages", per_stage);
  c10::impl::GenericList history(c10::AnyType::get());
  for (const EpochMetrics& m : progress.history) {
    c10::impl::GenericDict e = dict();
    e.insert("epoch", static_cast<int64_t>(m.epoch));
    for (const auto& [name, field] : epoch_fields()) e.insert(name, m.*field);
    history.push_back(e);
  }
  root.insert("history", history);
  root.insert("clock", progress.clock);
  root.insert("clock_step_seconds", progress.clock_step_seconds);
  save_pt(path, root);
}

int saved_epochs(const std::string& path) {
  if (!std::filesystem::exists(path)) return -1;
  const c10::IValue value = load_pt(path);
  if (!value.isGenericDict()) throw UserError(fmt::format("{}: not a pipelab training state.", path));
  return static_cast<int>(at_key(value.toGenericDict(), "epochs_done", path).toInt());
}

TrainingProgress load_training_state(const std::string& path, const HeldStages& held, BoundaryCodecs* codecs) {
  const std::vector<Stage*>& stages = held.stages;
  const std::vector<StagePolicy*>& policies = held.policies;
  const c10::IValue value = load_pt(path);
  if (!value.isGenericDict()) throw UserError(fmt::format("{}: not a pipelab training state.", path));
  const auto root = value.toGenericDict();
  if (at_key(root, "format", path).toStringRef() != kFormat) {
    throw UserError(fmt::format("{}: written by another pipelab version. Fix: delete it to restart the run.", path));
  }
  const auto per_stage = at_key(root, "stages", path).toListRef();
  if (per_stage.size() != stages.size()) {
    throw UserError(fmt::format("{}: saved with {} stages, the run has {}.", path, per_stage.size(), stages.size()));
  }
  for (size_t r = 0; r < stages.size(); ++r) {
    const auto s = per_stage[r].toGenericDict();
    load_model_state({stages[r]}, to_tensor_dict(at_key(s, "model", path), path), true, path);
    std::vector<std::pair<std::string, at::Tensor>> opt;
    for (const auto& kv : at_key(s, "optimizer", path).toGenericDict()) {
      opt.emplace_back(kv.key().toStringRef(), kv.value().toTensor());
    }
    stages[r]->optimizer().load_state(opt);
    stages[r]->optimizer().set_steps(at_key(s, "optimizer_steps", path).toInt());
    // Absent from states written before predictors' inputs were saved: they start empty.
    if (s.contains("optimizer_last_gradients")) {
      std::vector<std::pair<std::string, at::Tensor>> last;
      for (const auto& kv : s.at("optimizer_last_gradients").toGenericDict()) {
        last.emplace_back(kv.key().toStringRef(), kv.value().toTensor());
      }
      stages[r]->optimizer().load_last_gradients(last);
    }
    std::vector<at::Tensor> gens;
    for (const c10::IValue& g : at_key(s, "generators", path).toListRef()) gens.push_back(g.toTensor());
    stages[r]->set_rng_states(gens);
    policies[r]->load_state(*stages[r], at_key(s, "policy", path));
    if (LossScaler* scaler = stages[r]->loss_scaler()) {
      // Absent when the run was started without fp16: the scaler starts afresh.
      const auto it = s.find("loss_scaler");
      if (it != s.end()) scaler->load_state(it->value().toTensor());
    }
    if (codecs) {
      // Absent when the run was started without compression: its codecs start afresh.
      const auto it = s.find("codecs");
      if (it != s.end()) codecs->load_state(held.ids[r], it->value());
    }
  }
  TrainingProgress progress;
  progress.epochs_done = static_cast<int>(at_key(root, "epochs_done", path).toInt());
  progress.global_step = at_key(root, "global_step", path).toInt();
  for (const c10::IValue& e : at_key(root, "history", path).toListRef()) {
    const auto d = e.toGenericDict();
    EpochMetrics m;
    m.epoch = static_cast<int>(d.at("epoch").toInt());
    // A state written before a field existed keeps that field's default.
    for (const auto& [name, field] : epoch_fields()) {
      if (d.contains(name)) m.*field = d.at(name).toDouble();
    }
    progress.history.push_back(m);
  }
  // Absent from states written before the clock was kept: a clock shows in the epochs' times.
  if (root.contains("clock")) {
    progress.clock = root.at("clock").toStringRef();
    progress.clock_step_seconds = root.at("clock_step_seconds").toDouble();
  } else {
    for (const EpochMetrics& m : progress.history) {
      if (std::isfinite(m.simulated_seconds)) progress.clock = "a simulated cluster (not recorded)";
    }
  }
  return progress;
}

}  // namespace pipelab
