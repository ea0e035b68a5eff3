#pragma once
/// Helpers for the model tests: data specs, define a registered model from a YAML section, build
/// its blocks, count parameters and run a forward pass through the chain of blocks.
#include <string>
#include <vector>

#include "core/io/pt_file.h"
#include "core/model/model.h"

namespace pipelab::testing {

/// Image data [channels, height, width] with `classes` classes.
DataSpec images(int64_t channels, int64_t height, int64_t width, int64_t classes);
/// A language model's data: windows of `length` word ids below `words`, the next word at
/// every position as the target.
DataSpec word_windows(int64_t words, int64_t length);

/// The model that `section` (flow YAML, e.g. "{type: resnet, depth: 18}") defines for `data`.
ModelDef define_model(const std::string& section, const DataSpec& data);

/// Every block of `def`, built under run seed 0.
std::vector<Block> build_model(const ModelDef& def);

/// Parameters of the built blocks.
int64_t parameter_count(const std::vector<Block>& blocks);

/// Parameters of `def`, building one block at a time (peak memory: the largest block).
int64_t parameter_count(const ModelDef& def);

/// Copies `state` (a published state dict, names as the model's "<block>.<param>") into the
/// blocks, every tensor of each side matched by name and shape; test failures otherwise.
void load_strictly(std::vector<Block>& blocks, const TensorDict& state, const std::string& what);

/// Chains the blocks over `x` (training mode, without autograd) and returns the output.
torch::Tensor forward(std::vector<Block>& blocks, torch::Tensor x);
/// Every live tensor after the blocks (core/model/block_io.h).
LiveSet live_after(std::vector<Block>& blocks, torch::Tensor x);

/// Block names in order.
std::vector<std::string> block_names(const ModelDef& def);

/// The block names where each stage of `balance` starts.
std::vector<std::string> stage_starts(const ModelDef& def, const std::vector<int>& balance);

/// Sum of a balance.
int total(const std::vector<int>& balance);

/// The named parameter `name` ("<block>.<param path>") of the built blocks; undefined if absent.
torch::Tensor parameter(const std::vector<Block>& blocks, const std::string& name);

}  // namespace pipelab::testing
