#include "tools/simulate/costs.h"

#include <memory>

#include "core/config/config_node.h"
#include "core/config/yaml_file.h"

namespace pipelab::sim {

double StageCosts::seconds(char k) const {
  switch (k) {
    case 'F': return forward;
    case 'B': return backward;
    case 'I': return backward_input > 0 ? backward_input : 0.5 * backward;
    case 'W': return backward_weight > 0 ? backward_weight : 0.5 * backward;
    case 'H': return head;
    case 'U': return update;
    default: return 0;
  }
}

double StageCosts::transient(char k) const {
  switch (k) {
    case 'F': return forward_transient_bytes;
    case 'B': return backward_transient_bytes;
    case 'I': return backward_input_transient_bytes > 0 ? backward_input_transient_bytes : backward_transient_bytes;
    case 'W': return backward_weight_transient_bytes > 0 ? backward_weight_transient_bytes : backward_transient_bytes;
    case 'U': return update_transient_bytes;
    default: return 0;
  }
}

SimCosts SimCosts::scaled_to(double examples) const {
  if (micro_batch_size <= 0 || examples == micro_batch_size) return *this;
  const double f = examples / micro_batch_size;
  SimCosts out = *this;
  out.micro_batch_size = examples;
  for (StageCosts& s : out.stages) {
    for (double* v : {&s.forward, &s.backward, &s.backward_input, &s.backward_weight, &s.head, &s.activation_bytes,
                      &s.gradient_bytes, &s.retained_bytes, &s.peak_activation_bytes, &s.forward_transient_bytes,
                      &s.backward_transient_bytes, &s.backward_input_transient_bytes,
                      &s.backward_weight_transient_bytes}) {
      *v *= f;
    }
  }
  return out;
}

SimCosts load_costs(const std::string& path) {
  auto source = std::make_shared<ConfigSource>(path);
  const ConfigNode root(load_yaml_file(path), source, "");
  root.expect_map("a costs file (keys stages, link, micro_batch_size; docs/simulate.md)");
  SimCosts costs = read_options<SimCosts>(root, {"stages"});
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
    if (costs.stages.back().forward <= 0) {
      entry.fail("forward is not given or is 0", "give `forward: SECONDS` (> 0) for every stage");
    }
  }
  costs.source = (costs.step_seconds > 0 ? "measured: " : "given: ") + path;
  return costs;
}

}  // namespace pipelab::sim
