/// The checks a built run passes before anything is written (core/assembly/run_checks.h).
#include "core/assembly/run_checks.h"

#include <numeric>
#include <set>

#include <fmt/ranges.h>

#include "core/assembly/run_parts.h"
#include "core/nn/document_layout.h"
#include "core/schedule/generators.h"
#include "core/schedule/validate.h"

namespace pipelab {
namespace {

/// Key paths where two YAML trees differ ("optimizer.lr", "model.sizes[2]").
void differences(const YAML::Node& a, const YAML::Node& b, const std::string& path, std::vector<std::string>& out) {
  if (a.Type() != b.Type()) {
    out.push_back(path);
  } else if (a.IsMap()) {
    std::set<std::string> keys;
    for (const auto& kv : a) keys.insert(kv.first.as<std::string>());
    for (const auto& kv : b) keys.insert(kv.first.as<std::string>());
    for (const std::string& k : keys) differences(a[k], b[k], path.empty() ? k : path + "." + k, out);
  } else if (a.IsSequence()) {
    if (a.size() != b.size()) {
      out.push_back(path);
    } else {
      for (size_t i = 0; i < a.size(); ++i) differences(a[i], b[i], fmt::format("{}[{}]", path, i), out);
    }
  } else if (a.IsScalar() && a.Scalar() != b.Scalar()) {
    out.push_back(path);
  }
}

/// Validates one training schedule and its agreement with the scheme's placement.
void check_schedule(const Experiment& e, const RunPlan& plan, const Schedule& s, const ValidateOptions& rules) {
  validate_schedule(s, rules);
  // A captured forward keeps no SavedVariable OFFLOAD could move (core/stage/saved_tensors.h).
  bool moves = false;
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) moves = moves || is_memory(a.kind);
  }
  if (moves && e.run.cuda_graphs) {
    e.source->fail("run.cuda_graphs",
                   "the schedule offloads activations to host memory (partition.offload, or the scheme's own "
                   "OFFLOAD actions), which a forward replayed as a CUDA graph does not keep where they can move",
                   "set run.cuda_graphs: false, or leave partition.offload out");
  }
  std::vector<int> placed = s.placement();
  for (size_t r = 0; r < placed.size() && r < plan.placement().size(); ++r) {
    if (placed[r] >= 0 && placed[r] != plan.placement()[r]) {
      throw UserError(fmt::format("scheme {} places stage {} on device {}, but its schedule runs it on device d{}. Fix: "
                                  "make the scheme's placement and its schedule agree",
                                  e.scheme->type(), r, plan.placement()[r], placed[r]));
    }
  }
}

}  // namespace

void check_processes_agree(const Experiment& e, const YAML::Node& resolved) {
  YAML::Node mine = YAML::Clone(resolved);
  mine.remove("pipelab");
  mine["run"].remove("executor");
  YAML::Emitter emitter;
  emitter << mine;
  const std::string text = emitter.c_str();
  const std::vector<std::string> all = e.executor->world().gather_text("config", text);
  for (size_t p = 0; p < all.size(); ++p) {
    if (all[p] == text) continue;
    std::vector<std::string> paths;
    differences(mine, YAML::Load(all[p]), "", paths);
    throw UserError(fmt::format("{}: process {} runs another configuration than this one ({}): {} differ. Fix: start "
                                "every rank with the same file and the same --set values.",
                                e.source->file(), p, e.executor->world().process_name(), fmt::join(paths, ", ")));
  }
}

void check_model_takes_data(const Experiment& e, const RunParts& parts) {
  // Two real examples through every stage (evaluation mode: no statistic moves, no
  // gradient), so that a model that cannot take the dataset's examples fails here, with
  // the files named, and not in the first training step after the run folder exists.
  const int64_t n = std::min<int64_t>(2, parts.data.train->size());
  std::vector<int64_t> index(static_cast<size_t>(n));
  std::iota(index.begin(), index.end(), 0);
  const Batch batch = parts.data.train->get(index, 0);
  Tensors x{parts.data.spec.integer_input ? batch.x : batch.x.to(parts.dtype)};
  try {
    for (const auto& stage : parts.stages) {
      stage->set_training(false);
      const at::Tensor target = stage->is_last() ? batch.y.to(stage->device()) : at::Tensor();
      for (at::Tensor& t : x) t = t.to(stage->device());
      const at::Tensor documents = batch.documents.defined() ? batch.documents.to(stage->device()) : at::Tensor();
      const nn::DocumentScope scope(documents);  // ragged text's layout, as the executors scope it
      ForwardResult r = stage->evaluate(x, target);
      if (!stage->is_last()) x = std::move(r.activations);
      if (stage->is_last()) break;  // replica 0 is enough
    }
  } catch (const c10::Error& err) {
    model_data_mismatch(e, parts.data.spec, err);
  }
}

void model_data_mismatch(const Experiment& e, const DataSpec& spec, const c10::Error& err) {
  std::string why = err.what_without_backtrace();
  why = why.substr(0, why.find('\n'));
  throw ConfigError(fmt::format("{}: model {} cannot take the examples of dataset {} (shape {}, {}): {}. Fix: check "
                                "the model's options against the dataset (`pipelab describe {}` shows the shapes).",
                                e.source->file(), e.model->type(), e.dataset->type(),
                                shape_text(spec.input_shape), spec.integer_input ? "token ids" : "features",
                                why, e.source->file()));
}

void check_schedules(const Experiment& e, const RunParts& parts) {
  const int stages = parts.plan.stages();
  parts.plan.check_batch_size(e.run.batch_size);
  parts.plan.check_sequences(parts.data.spec.input_shape);
  // The first schedule run's (a mini-batch's, an epoch's or the run's first epoch's), with
  // its messages: what the executors run.
  const RunPlan& plan = parts.plan;
  check_schedule(e, plan, plan.training(plan.run_units(e.run.batch_size, parts.train->batches())), plan.rules());
  validate_schedule(schedules::forward_only(stages, static_cast<int>(std::max<int64_t>(parts.test->batches(), 1)),
                                            {parts.plan.placement().begin(), parts.plan.placement().begin() + stages}));
}

}  // namespace pipelab
