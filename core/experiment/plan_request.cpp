#include "core/experiment/plan_request.h"

#include "core/config/registry.h"
#include "core/experiment/experiment.h"
#include "core/experiment/optimizer_section.h"
#include "core/model/model.h"

namespace pipelab {
namespace {

/// Whether run.executor names the executor of several processes.
bool runs_processes(const ConfigNode& top) {
  const YAML::Node root = top.yaml();
  if (!root["run"] || !root["run"].IsMap() || !root["run"]["executor"]) return false;
  const YAML::Node executor = root["run"]["executor"];
  const YAML::Node type = executor.IsMap() && executor["type"] ? executor["type"] : executor;
  return type.IsScalar() && type.Scalar() == "distributed";
}

}  // namespace

PlanRequest plan_request(const ConfigNode& top, const Scheme& scheme, int stages, const ModelFactory* model) {
  PlanRequest r;
  r.scheme = &scheme;
  r.source = top.source();
  PartitionOptions partition;
  if (top.has("partition")) partition = read_options<PartitionOptions>(top.child("partition"));
  r.stages = stages > 0 ? stages : partition.stages;
  r.replicas = partition.replicas;
  r.recompute = partition.recompute;
  r.offload = partition.offload;
  if (top.has("optimizer")) r.gradients = read_gradient_options(top.child("optimizer"));
  if (top.has("model")) {
    std::unique_ptr<ModelFactory> made;
    if (!model) model = (made = Registry<ModelFactory>::get().create(top.child("model"))).get();
    r.tied_weights = model->ties_weights();
    r.segment_token_work = model->segment_token_work();
  } else {
    r.segment_token_work = 0.0;  // no model to refuse a sequence split: drawn as the scheme makes it
  }
  r.several_processes = runs_processes(top);
  // `compression: none` says so explicitly (a sweep's uncompressed cell).
  if (top.has("compression") && top.child("compression").text() != "none") {
    r.compression = read_compression(top.child("compression"));
  }
  return r;
}

PlanRequest plan_request(const Experiment& e, int stages) {
  PlanRequest r = e.request;
  r.scheme = e.scheme.get();
  if (stages > 0) r.stages = stages;
  return r;
}

}  // namespace pipelab
