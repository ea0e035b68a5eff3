#include "core/experiment/experiment.h"

#include <cstdlib>
#include <filesystem>

#include "core/config/plugins.h"
#include "core/config/yaml_file.h"
#include "core/experiment/input_paths.h"
#include "core/experiment/optimizer_section.h"
#include "core/experiment/plan_request.h"
#include "core/scheme/placed_scheme.h"

namespace pipelab {
namespace {

/// `executor: sequential` is short for `executor: {type: sequential}`.
ConfigNode executor_section(const ConfigNode& run) {
  if (!run.has("executor")) {
    YAML::Node node(YAML::NodeType::Map);
    node["type"] = "sequential";
    return ConfigNode(node, run.source(), run.child_path("executor"));
  }
  const ConfigNode n = run.child("executor");
  if (n.yaml().IsScalar()) {
    YAML::Node node(YAML::NodeType::Map);
    node["type"] = n.yaml();
    return ConfigNode(node, run.source(), n.path());
  }
  return n;
}

template <class Base>
std::unique_ptr<Base> required_section(const ConfigNode& root, const std::string& key) {
  if (!root.has(key)) {
    root.fail(fmt::format("missing the '{}' section", key),
              fmt::format("add `{}: {{type: <name>, ...}}` with one of: {}", key,
                          join(Registry<Base>::get().names(), ", ")));
  }
  return Registry<Base>::get().create(root.child(key));
}

/// `plugins: [lib.so, ...]` (or one path): shared libraries that register components.
void load_listed_plugins(const ConfigNode& node) {
  const std::vector<std::string> paths = node.yaml().IsScalar() ? std::vector<std::string>{node.text()}
                                                                : ConfigValue<std::vector<std::string>>::read(node);
  for (const std::string& path : paths) {
    try {
      load_plugin(path);
    } catch (const UserError& e) {
      node.fail(e.what(), "give the path of a plugin built with find_package(pipelab) (docs/adding-a-scheme.md)");
    }
  }
}

/// dataset.limit and dataset.test_limit: every dataset's keys, not one dataset's options.
/// They are read here and hidden from the dataset while it reads its own, then put back:
/// the tree is the caller's (a sweep writes each cell's tree out as its experiment.yaml).
class DataLimitsTaken {
 public:
  explicit DataLimitsTaken(const ConfigNode& top) {
    if (!top.has("dataset") || !top.child("dataset").is_map()) return;
    dataset_ = top.child("dataset").yaml();
    const ConfigNode dataset = top.child("dataset");
    for (const auto& [key, value] :
         {std::pair<const char*, int64_t*>{"limit", &limits.limit}, {"test_limit", &limits.test_limit}}) {
      if (!dataset.has(key)) continue;
      *value = ConfigValue<int64_t>::read(dataset.child(key));
      if (*value < 0) dataset.child(key).fail("it is negative", "give a number of examples, or 0 for all");
      taken_.emplace_back(key, dataset.yaml()[key]);
      dataset_.remove(key);
    }
  }
  ~DataLimitsTaken() {
    for (const auto& [key, value] : taken_) dataset_[key] = value;
  }
  DataLimitsTaken(const DataLimitsTaken&) = delete;
  DataLimitsTaken& operator=(const DataLimitsTaken&) = delete;

  DataLimits limits;

 private:
  YAML::Node dataset_;
  std::vector<std::pair<std::string, YAML::Node>> taken_;
};

}  // namespace

Experiment Experiment::from_tree(YAML::Node root, std::shared_ptr<ConfigSource> source, const std::string& name) {
  const ConfigNode top(root, source, "");
  top.expect_map("an experiment with model, dataset, partition, scheme, optimizer and run sections");
  Experiment e;
  e.name = name;
  e.source = source;
  static const std::vector<std::string> kSections{"model", "dataset", "partition", "scheme", "optimizer", "lr_schedule",
                                                  "run", "init", "compression", "pipelab", "plugins"};
  for (const std::string& key : top.keys()) {
    if (key == "sweep") top.child(key).fail("a grid of runs", "run it with `pipelab sweep " + source->file() + "`");
    if (std::find(kSections.begin(), kSections.end(), key) == kSections.end()) {
      throw ConfigError(fmt::format("{}: {}: unknown section '{}'. Fix: remove it or use one of: {}.",
                                    top.where_key(key), key, key, join(closest_first(key, kSections), ", ")));
    }
  }
  e.model = required_section<ModelFactory>(top, "model");
  // Plugins first: they may register the types the sections name.
  if (top.has("plugins")) load_listed_plugins(top.child("plugins"));
  {
    const DataLimitsTaken taken(top);
    e.limits = taken.limits;
    e.dataset = required_section<DatasetFactory>(top, "dataset");
  }
  e.scheme = required_section<Scheme>(top, "scheme");
  e.optimizer = read_optimizer_section(top, e.gradients);
  e.lr_schedule = top.has("lr_schedule") ? Registry<LrSchedule>::get().create(top.child("lr_schedule"))
                                         : Registry<LrSchedule>::get().create_default("constant");
  if (top.has("partition")) {
    e.partition = read_options<PartitionOptions>(top.child("partition"));
    if (top.child("partition").has("placement")) {
      e.scheme = placed_scheme(std::move(e.scheme), e.partition.placement, top.child("partition").child("placement"));
    }
  }
  if (!top.has("run")) {
    top.fail("missing the 'run' section", "add `run: {epochs: <n>, batch_size: <n>}`");
  }
  const ConfigNode run = top.child("run");
  e.run = read_options<RunOptions>(run, {"executor"});
  e.executor = Registry<Executor>::get().create(executor_section(run));
  if (top.has("init")) e.init = read_options<InitOptions>(top.child("init"));
  // `compression: none` says so explicitly (a sweep's uncompressed cell).
  if (top.has("compression") && top.child("compression").text() != "none") {
    e.compression = read_compression(top.child("compression"));
  }
  if (e.run.output.empty()) e.run.output = "runs/" + name;
  e.request = plan_request(top, *e.scheme, 0, e.model.get());
  return e;
}

DataContext Experiment::data_context() const {
  DataContext context;
  context.seed = static_cast<uint64_t>(run.seed);
  const char* env = std::getenv("PIPELAB_DATA_DIR");
  context.data_dir = run.data_dir ? *run.data_dir : env && *env ? env : "data";
  return context;
}

Experiment Experiment::load(const std::string& path, const std::vector<std::string>& overrides) {
  auto source = std::make_shared<ConfigSource>(path);
  YAML::Node root = load_yaml_file(path);
  apply_overrides(root, overrides, *source);
  for (const std::string& note : source->notes()) fmt::print(stderr, "note: {}\n", note);
  resolve_input_paths(root, *source);
  return from_tree(root, source, std::filesystem::path(path).stem().string());
}

Experiment Experiment::parse(const std::string& yaml, const std::string& name,
                             const std::vector<std::string>& overrides) {
  auto source = std::make_shared<ConfigSource>(name);
  YAML::Node root = parse_yaml(yaml, name);
  apply_overrides(root, overrides, *source);
  return from_tree(root, source, std::filesystem::path(name).stem().string());
}

}  // namespace pipelab
