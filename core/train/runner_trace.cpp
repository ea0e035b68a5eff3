/// The traced epoch's records: trace.json, metrics/actions.csv and metrics/costs.json
/// (run.trace), gathered from every process and written by the one that writes records.
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "core/exec/world.h"
#include "core/train/runner.h"
#include "core/train/stage_costs.h"
#include "core/train/trace.h"

namespace pipelab {

void Runner::write_trace(RunRecord& record, bool writer) const {
  if (!e_.run.trace) return;
  // A collective, before anything that differs between processes.
  const std::vector<int64_t> optimizer_bytes = gathered_optimizer_bytes();
  const ExecStats& st = last_train_stats_;
  bool any = false;
  for (const auto& a : st.actions) any = any || !a.empty();
  if (!writer || !any) return;
  TraceArrows arrows;
  // The trace draws a message from stage s to s + 1; replicas are not told apart there.
  arrows.activations = plan_.replicas() == 1 && !plan_.layout().replicated();
  arrows.gradients = arrows.activations && !e_.scheme->add_ons()->routes_own_gradients();
  record.file("trace.json", chrome_trace(st, plan_.placement(), arrows));
  record.file("metrics/actions.csv", actions_csv(st, plan_.placement()));
  record.file("metrics/costs.json", stage_costs_json(st, stage_cost_inputs(optimizer_bytes)));
}

std::vector<int64_t> Runner::gathered_optimizer_bytes() const {
  // Only the process that runs a stage has stepped its optimizer; the others' copies hold
  // no state, so the largest figure over processes is the stage's.
  std::vector<int64_t> bytes;
  for (const auto& s : stages_) {
    int64_t n = 0;
    for (const auto& [name, t] : s->optimizer().state()) n += tensor_bytes({t});
    bytes.push_back(n);
  }
  for (const std::vector<int64_t>& other : gather_values(e_.executor->world(), bytes)) {
    for (size_t s = 0; s < bytes.size() && s < other.size(); ++s) bytes[s] = std::max(bytes[s], other[s]);
  }
  return bytes;
}

StageCostInputs Runner::stage_cost_inputs(std::vector<int64_t> optimizer_bytes) const {
  StageCostInputs in;
  in.executor = e_.executor->type();
  in.scheme = e_.scheme->type();
  in.dtype = dtype_ == at::kDouble ? "float64" : "float32";
  in.micro_batches = e_.scheme->micro_batches();
  in.micro_batch_size = static_cast<double>(e_.run.batch_size) / std::max(in.micro_batches, 1);
  // Per mini-batch: an epoch-long (or run-long) schedule run covers many.
  in.step_seconds = traced_steps_.seconds / static_cast<double>(std::max<int64_t>(traced_steps_.mini_batches, 1));
  in.steps = traced_steps_.runs;
  in.placement = plan_.placement();
  if (e_.compression.any()) {
    YAML::Emitter flow;
    flow << YAML::Flow << e_.compression.resolved();
    in.compression = flow.c_str();
  }
  for (const auto& s : stages_) {
    in.parameter_bytes.push_back(tensor_bytes(s->module().parameters()));
    in.buffer_bytes.push_back(tensor_bytes(s->module().buffers()));
  }
  in.tied_bytes = cross_stage_tie_bytes();
  in.optimizer_bytes = std::move(optimizer_bytes);
  in.stored_versions = last_stage_metric((std::filesystem::path(e_.run.output) / "metrics/stages.csv").string(), "stored_versions", stage_count(), 1.0);
  return in;
}

}  // namespace pipelab
