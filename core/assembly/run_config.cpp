/// What a run records of its configuration: the resolved configuration written to
/// config.yaml (and compared by --resume and across processes).
#include <fmt/format.h>

#include "core/assembly/run_config.h"
#include "core/assembly/run_parts.h"
#include "core/config/plugins.h"
#include "core/device/device.h"
#include "core/util/names.h"
#include "core/util/provenance.h"

namespace pipelab {

YAML::Node resolved_config(const Experiment& e, const RunParts& parts) {
  YAML::Node root(YAML::NodeType::Map);
  YAML::Node meta(YAML::NodeType::Map);
  meta["version"] = pipelab_version();
  meta["git_revision"] = git_revision();
  meta["runtime"] = device::describe_runtime();
  // What the run's threads are: the executor's layout (device threads x intra-op threads),
  // not the process's intra-op count alone.
  meta["threads"] = e.executor->thread_layout(parts.plan.devices());
  root["pipelab"] = meta;
  // What registered the run's components must be loaded again to rerun config.yaml.
  if (!loaded_plugins().empty()) {
    YAML::Node plugins(YAML::NodeType::Sequence);
    for (const std::string& p : loaded_plugins()) plugins.push_back(p);
    root["plugins"] = plugins;
  }
  root["model"] = e.model->resolved();
  root["dataset"] = e.dataset->resolved();
  if (e.limits.any()) {  // only when set: other runs keep their config.yaml (and --resume)
    if (e.limits.limit) root["dataset"]["limit"] = e.limits.limit;
    if (e.limits.test_limit) root["dataset"]["test_limit"] = e.limits.test_limit;
  }
  PartitionOptions partition;
  partition.stages = parts.plan.stages();
  partition.replicas = e.partition.replicas;  // as asked (dp's own count is its scheme's)
  partition.balance.kind = Balance::Kind::Counts;
  partition.balance.counts = parts.balance;
  root["partition"] = write_options(partition);
  root["scheme"] = e.scheme->resolved();
  YAML::Node optimizer = e.optimizer->resolved();
  // The gradient keys only when set, so that runs without them keep their config.yaml (and
  // resume across versions).
  const GradientOptions& g = e.gradients;
  const bool set = g.clip_grad_norm || g.clip_norm_type != GradientOptions{}.clip_norm_type ||
                   g.clip_scope != GradientOptions::ClipScope::Auto || g.tied_gradients != GradientOptions::Tied::Sum;
  if (set) {
    YAML::Node written = write_options(g);
    // The clip's norm and scope mean something only with the clip (they are refused without).
    if (!g.clip_grad_norm) {
      for (const char* key : {"clip_grad_norm", "clip_norm_type", "clip_scope"}) written.remove(key);
    }
    for (const auto& kv : written) optimizer[kv.first] = kv.second;
  }
  root["optimizer"] = optimizer;
  root["lr_schedule"] = e.lr_schedule->resolved();
  if (e.compression.any()) root["compression"] = e.compression.resolved();
  YAML::Node run = write_options(e.run);
  if (e.run.max_steps == 0) run.remove("max_steps");  // as the limits: only when set
  if (e.run.targets.any()) {
    YAML::Node targets = run["targets"];
    std::vector<std::string> unset;  // the targets not given: left out, as max_steps is
    for (const auto& kv : targets) {
      if (kv.second.IsNull()) unset.push_back(kv.first.as<std::string>());
    }
    for (const std::string& key : unset) targets.remove(key);
  } else {
    run.remove("targets");
  }
  run["executor"] = e.executor->resolved();
  root["run"] = run;
  if (e.init.from) root["init"] = write_options(e.init);
  return root;
}

}  // namespace pipelab
