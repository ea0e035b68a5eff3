#include "core/experiment/optimizer_section.h"

#include "core/config/registry.h"

namespace pipelab {
namespace {

std::set<std::string> optimizer_keys(const ConfigNode& section) {
  const std::set<std::string> ours = GradientOptions::keys();
  std::set<std::string> theirs;
  for (const std::string& key : section.keys()) {
    if (!ours.count(key)) theirs.insert(key);
  }
  return theirs;
}

}  // namespace

GradientOptions read_gradient_options(const ConfigNode& section) {
  if (!section.is_map()) return {};
  GradientOptions g = read_options<GradientOptions>(section, optimizer_keys(section));
  g.tied_gradients_given = section.has("tied_gradients");
  return g;
}

std::unique_ptr<OptimizerFactory> read_optimizer_section(const ConfigNode& root, GradientOptions& gradients) {
  const auto registry = [&](const ConfigNode& section) { return Registry<OptimizerFactory>::get().create(section); };
  if (!root.has("optimizer")) {
    root.fail("missing the 'optimizer' section",
              fmt::format("add `optimizer: {{type: <name>, ...}}` with one of: {}",
                          join(Registry<OptimizerFactory>::get().names(), ", ")));
  }
  const ConfigNode section = root.child("optimizer");
  if (!section.is_map() || optimizer_keys(section).size() == section.keys().size()) return registry(section);
  gradients = read_gradient_options(section);
  // The same section without our keys: the children keep their places (line:column).
  const std::set<std::string> ours = GradientOptions::keys();
  YAML::Node rest(YAML::NodeType::Map);
  for (const auto& kv : section.yaml()) {
    if (!ours.count(kv.first.Scalar())) rest.force_insert(kv.first, kv.second);
  }
  return registry(ConfigNode(rest, section.source(), section.path()));
}

}  // namespace pipelab
