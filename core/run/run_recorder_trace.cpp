/// The traced epoch's records: trace.json, metrics/actions.csv and metrics/costs.json
/// (run.trace), gathered from every process and written by the one that writes records.
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "core/assembly/run_parts.h"
#include "core/device/device.h"
#include "core/exec/world.h"
#include "core/plan/topology.h"
#include "core/records/stage_costs.h"
#include "core/records/trace.h"
#include "core/run/run_recorder.h"

namespace pipelab {

void RunRecorder::write_trace(const PassMeasurements& measured) {
  if (!e_.run.trace) return;
  // A collective, before anything that differs between processes.
  const std::vector<int64_t> optimizer_bytes = gathered_optimizer_bytes();
  const ExecStats& st = measured.stats;
  bool any = false;
  for (const auto& a : st.actions) any = any || !a.empty();
  if (!writer() || !any) return;
  TraceArrows arrows;
  // The trace draws a message from stage s to s + 1; replicas are not told apart there.
  arrows.activations = parts_.plan.replicas() == 1 && !parts_.plan.layout().replicated();
  arrows.gradients = arrows.activations && !e_.scheme->add_ons()->routes_own_gradients();
  record_.file("trace.json", chrome_trace(st, parts_.plan.placement(), arrows));
  record_.file("metrics/actions.csv", actions_csv(st, parts_.plan.placement()));
  record_.file("metrics/costs.json", stage_costs_json(st, stage_cost_inputs(optimizer_bytes, measured)));
}

std::vector<int64_t> RunRecorder::gathered_optimizer_bytes() const {
  // Only the process that runs a stage has stepped its optimizer; the others' copies hold
  // no state, so the largest figure over processes is the stage's.
  std::vector<int64_t> bytes;
  for (const auto& s : parts_.stages) {
    int64_t n = 0;
    for (const auto& [name, t] : s->optimizer().state()) n += tensor_bytes({t});
    bytes.push_back(n);
  }
  for (const std::vector<int64_t>& other : gather_values(e_.executor->world(), bytes)) {
    for (size_t s = 0; s < bytes.size() && s < other.size(); ++s) bytes[s] = std::max(bytes[s], other[s]);
  }
  return bytes;
}

StageCostInputs RunRecorder::stage_cost_inputs(std::vector<int64_t> optimizer_bytes,
                                               const PassMeasurements& measured) const {
  StageCostInputs in;
  in.executor = e_.executor->type();
  in.scheme = e_.scheme->type();
  in.dtype = parts_.dtype == at::kDouble ? "float64" : "float32";
  // The step the run trained (RunPlan::step): each replica of the pipeline takes its share of
  // the mini-batch before cutting it into micro-batches (core/feed/feeds.cpp), the examples
  // the stages' figures are for, which `pipelab simulate --costs` scales from (it once read a
  // replica's costs as the whole batch's and replayed a replicated run at half its measured
  // figures); a pipeline that runs on takes a loader batch's share per unit.
  const StepShape step = parts_.plan.step(e_.run.batch_size);
  in.micro_batches = step.micro_batches;
  in.micro_batch_size = step.examples_per_micro_batch;
  in.segments = parts_.plan.sequence_split().segments;
  const std::vector<int64_t>& shape = parts_.data.spec.input_shape;
  if (parts_.data.spec.integer_input && shape.size() == 1) in.sequence_length = shape[0];
  in.ragged = parts_.data.spec.documents;
  // Per mini-batch: an epoch-long (or run-long) schedule run covers many.
  in.step_seconds = measured.seconds / static_cast<double>(std::max<int64_t>(measured.mini_batches, 1));
  in.steps = measured.runs;
  in.placement = parts_.plan.placement();
  in.topology = topology_of(parts_.plan);
  if (e_.compression.any()) {
    YAML::Emitter flow;
    flow << YAML::Flow << e_.compression.resolved();
    in.compression = flow.c_str();
  }
  for (const auto& s : parts_.stages) {
    in.parameter_bytes.push_back(tensor_bytes(s->module().parameters()));
    in.buffer_bytes.push_back(tensor_bytes(s->module().buffers()));
    const device::AllocatorPeak peak = device::allocator_peak(s->device());
    in.cuda_allocated_peak_bytes.push_back(peak.allocated);
    in.cuda_reserved_peak_bytes.push_back(peak.reserved);
    in.cuda_device.push_back(s->device().is_cuda() ? std::max<int>(s->device().index(), 0) : -1);
  }
  in.tied_bytes = parts_.cross_stage_tie_bytes();
  in.optimizer_bytes = std::move(optimizer_bytes);
  in.stored_versions = last_stage_metric((std::filesystem::path(e_.run.output) / "metrics/stages.csv").string(),
                                         "stored_versions", parts_.stage_count(), 1.0);
  return in;
}

}  // namespace pipelab
