/// The runner's record of what it runs: the resolved configuration written to config.yaml
/// (and compared by --resume), and the data limits it applies and reports.
#include <fmt/format.h>

#include "core/data/subset.h"
#include "core/device/device.h"
#include "core/train/runner.h"
#include "core/util/names.h"
#include "core/util/plugins.h"
#include "core/util/provenance.h"

namespace pipelab {

void Runner::limit_data() {
  // The same subset whatever run.seed (core/data/subset.h): seeds compare on equal data.
  const int64_t train = data_.train->size(), test = data_.test->size();
  data_.train = subset(data_.train, e_.limits.limit, 0);
  data_.test = subset(data_.test, e_.limits.test_limit, 1);
  std::vector<std::string> parts;
  if (e_.limits.limit > 0) parts.push_back(fmt::format("training on {} of {} examples", data_.train->size(), train));
  if (e_.limits.test_limit > 0) parts.push_back(fmt::format("testing on {} of {}", data_.test->size(), test));
  if (e_.run.max_steps > 0) parts.push_back(fmt::format("at most {} training steps (run.max_steps)", e_.run.max_steps));
  if (!parts.empty()) limits_report_ = "limits: " + join(parts, ", ");
  if (e_.run.max_steps > 0 && e_.scheme->span() == Span::Run) {
    e_.source->fail("run.max_steps",
                    fmt::format("scheme {} never flushes its pipeline, so its run cannot stop at a step count",
                                e_.scheme->type()),
                    "count its run in epochs (run.epochs), on a smaller training set (dataset.limit)");
  }
}

YAML::Node Runner::resolved_config() const {
  YAML::Node root(YAML::NodeType::Map);
  YAML::Node meta(YAML::NodeType::Map);
  meta["version"] = pipelab_version();
  meta["git_revision"] = git_revision();
  meta["runtime"] = device::describe_runtime();
  // What the run's threads are: the executor's layout (device threads x intra-op threads),
  // not the process's intra-op count alone.
  meta["threads"] = e_.executor->thread_layout(device_count());
  root["pipelab"] = meta;
  // What registered the run's components must be loaded again to rerun config.yaml.
  if (!loaded_plugins().empty()) {
    YAML::Node plugins(YAML::NodeType::Sequence);
    for (const std::string& p : loaded_plugins()) plugins.push_back(p);
    root["plugins"] = plugins;
  }
  root["model"] = e_.model->resolved();
  root["dataset"] = e_.dataset->resolved();
  if (e_.limits.any()) {  // only when set: other runs keep their config.yaml (and --resume)
    if (e_.limits.limit) root["dataset"]["limit"] = e_.limits.limit;
    if (e_.limits.test_limit) root["dataset"]["test_limit"] = e_.limits.test_limit;
  }
  PartitionOptions partition;
  partition.stages = plan_.stages();
  partition.replicas = e_.partition.replicas;  // as asked (dp's own count is its scheme's)
  partition.balance.kind = Balance::Kind::Counts;
  partition.balance.counts = balance_;
  root["partition"] = write_options(partition);
  root["scheme"] = e_.scheme->resolved();
  YAML::Node optimizer = e_.optimizer->resolved();
  // The gradient keys only when set, so that runs without them keep their config.yaml (and
  // resume across versions).
  const GradientOptions& g = e_.gradients;
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
  root["lr_schedule"] = e_.lr_schedule->resolved();
  if (e_.compression.any()) root["compression"] = e_.compression.resolved();
  YAML::Node run = write_options(e_.run);
  if (e_.run.max_steps == 0) run.remove("max_steps");  // as the limits: only when set
  run["executor"] = e_.executor->resolved();
  root["run"] = run;
  if (e_.init.from) root["init"] = write_options(e_.init);
  return root;
}

}  // namespace pipelab
