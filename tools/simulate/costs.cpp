#include "tools/simulate/costs.h"

#include <fmt/format.h>

#include <memory>

#include "core/config/config_node.h"
#include "core/config/yaml_file.h"

namespace pipelab::sim {

double StageCosts::seconds_of(ActionKind k) const {
  const ActionKindInfo& i = kind_info(k);
  if (i.role != KindRole::Compute) return 0;
  return seconds[k] > 0 || i.cost_fallback == k ? seconds[k] : i.cost_share * seconds[i.cost_fallback];
}

double StageCosts::transient_of(ActionKind k) const {
  const ActionKindInfo& i = kind_info(k);
  if (i.role != KindRole::Compute) return 0;
  // A kind with figures of its own (seconds or bytes: measured, or derived) has its own
  // transient, 0 included (the first stage's I computes nothing); without any, a split
  // backward's halves each need what the whole one needs while they run.
  const bool own = transient_bytes[k] > 0 || seconds[k] > 0 || i.cost_fallback == k;
  return own ? transient_bytes[k] : transient_bytes[i.cost_fallback];
}

SimCosts SimCosts::scaled_to(double examples) const {
  if (micro_batch_size <= 0 || examples == micro_batch_size) return *this;
  const double f = examples / micro_batch_size;
  SimCosts out = *this;
  out.micro_batch_size = examples;
  for (StageCosts& s : out.stages) {
    // Everything a micro-batch's examples make grows with them; an update does not.
    for (double* v : {&s.activation_bytes, &s.gradient_bytes, &s.retained_bytes, &s.backward_input_kept_bytes, &s.offload_bytes, &s.output_bytes,
                      &s.peak_activation_bytes,
                      &s.device_peak_bytes, &s.host_peak_bytes, &s.codec_forward_seconds, &s.codec_backward_seconds}) {
      *v *= f;
    }
    for (const KindCostKeys& k : kind_cost_keys()) {
      if (k.kind == ActionKind::Update) continue;
      s.seconds[k.kind] *= f;
      s.transient_bytes[k.kind] *= f;
    }
  }
  return out;
}

SimCosts load_costs(const std::string& path) {
  auto source = std::make_shared<ConfigSource>(path);
  const ConfigNode root(load_yaml_file(path), source, "");
  root.expect_map("a costs file (keys stages, link, micro_batch_size; docs/simulate.md)");
  // The run's topology is what it was measured on; the plan replayed gives its own.
  SimCosts costs = read_options<SimCosts>(root, {"stages", "topology"});
  if (!costs.format.empty() && costs.format != "pipelab-stage-costs") {
    root.child("format").fail(fmt::format("'{}' is not a pipelab costs file", costs.format),
                              "give the metrics/costs.json of a run, or a YAML file with format: pipelab-stage-costs");
  }
  if (costs.version != 1) root.child("version").fail("only version 1 is known", "write version: 1");
  if (!root.has("stages") || !root.child("stages").yaml().IsSequence() || root.child("stages").yaml().size() == 0) {
    root.fail("no `stages` list", "add `stages: [{forward: 0.01, backward: 0.02, ...}, ...]`, one entry per stage");
  }
  const ConfigNode list = root.child("stages");
  for (size_t i = 0; i < list.yaml().size(); ++i) {
    const ConfigNode entry(list.yaml()[i], source, fmt::format("stages[{}]", i));
    entry.expect_map("a stage's costs");
    costs.stages.push_back(read_options<StageCosts>(entry));
    if (costs.stages.back().seconds[ActionKind::Forward] <= 0) {
      entry.fail("forward is not given or is 0", "give `forward: SECONDS` (> 0) for every stage");
    }
  }
  costs.source = (costs.step_seconds > 0 ? "measured: " : "given: ") + path;
  return costs;
}

}  // namespace pipelab::sim
