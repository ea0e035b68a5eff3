#include "tests/models/zoo.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <numeric>

namespace pipelab::testing {

DataSpec images(int64_t channels, int64_t height, int64_t width, int64_t classes) {
  DataSpec d;
  d.input_shape = {channels, height, width};
  d.classes = classes;
  return d;
}

DataSpec word_windows(int64_t words, int64_t length) {
  DataSpec d;
  d.input_shape = {length};
  d.classes = words;
  d.integer_input = true;
  d.target_shape = {length};
  return d;
}

ModelDef define_model(const std::string& section, const DataSpec& data) {
  const ConfigNode node(YAML::Load(section), std::make_shared<ConfigSource>("test.yaml"), "model");
  return Registry<ModelFactory>::get().create(node)->define(data);
}

std::vector<Block> build_model(const ModelDef& def) {
  std::vector<Block> blocks;
  for (size_t i = 0; i < def.blocks.size(); ++i) blocks.push_back(build_block(def, i, 0));
  return blocks;
}

int64_t parameter_count(const std::vector<Block>& blocks) {
  int64_t n = 0;
  for (const Block& b : blocks) n += count_parameters(*b.module.ptr());
  return n;
}

int64_t parameter_count(const ModelDef& def) {
  int64_t n = 0;
  for (size_t i = 0; i < def.blocks.size(); ++i) n += count_parameters(*build_block(def, i, 0).module.ptr());
  return n;
}

torch::Tensor forward(std::vector<Block>& blocks, torch::Tensor x) { return live_after(blocks, std::move(x)).get("x"); }

LiveSet live_after(std::vector<Block>& blocks, torch::Tensor x) {
  torch::NoGradGuard no_grad;  // shapes only: no graph to keep
  LiveSet live(std::move(x));
  for (Block& b : blocks) live.run(b);
  return live;
}

std::vector<std::string> block_names(const ModelDef& def) {
  std::vector<std::string> names;
  for (const BlockRecipe& r : def.blocks) names.push_back(r.name);
  return names;
}

std::vector<std::string> stage_starts(const ModelDef& def, const std::vector<int>& balance) {
  std::vector<std::string> starts;
  size_t index = 0;
  for (int count : balance) {
    starts.push_back(index < def.blocks.size() ? def.blocks[index].name : "<past the end>");
    index += static_cast<size_t>(count);
  }
  return starts;
}

int total(const std::vector<int>& balance) { return std::accumulate(balance.begin(), balance.end(), 0); }

torch::Tensor parameter(const std::vector<Block>& blocks, const std::string& name) {
  for (const Block& b : blocks) {
    for (const auto& p : b.module.ptr()->named_parameters()) {
      if (b.name + "." + p.key() == name) return p.value();
    }
  }
  return {};
}

void load_strictly(std::vector<Block>& blocks, const TensorDict& state, const std::string& what) {
  std::map<std::string, at::Tensor> mine;
  for (Block& b : blocks) {
    for (const auto& kv : b.module.ptr()->named_parameters()) mine[b.name + "." + kv.key()] = kv.value();
    for (const auto& kv : b.module.ptr()->named_buffers()) mine[b.name + "." + kv.key()] = kv.value();
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, t] : state) {
    auto it = mine.find(name);
    ASSERT_NE(it, mine.end()) << what << ": the file's " << name << " is not in the model";
    ASSERT_EQ(it->second.sizes(), t.sizes()) << what << ": " << name;
    it->second.copy_(t);
    mine.erase(it);
  }
  for (const auto& kv : mine) ADD_FAILURE() << what << ": the model's " << kv.first << " is not in the file";
}

}  // namespace pipelab::testing
