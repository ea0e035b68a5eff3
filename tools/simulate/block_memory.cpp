#include "tools/simulate/block_memory.h"

#include <torch/torch.h>

#include "core/util/memory_meter.h"

namespace pipelab::sim {

BlockMemory measure_block_memory(const ModelDef& def, const DataSpec& data, uint64_t seed, int examples) {
  std::vector<int64_t> shape{examples};
  shape.insert(shape.end(), data.input_shape.begin(), data.input_shape.end());
  std::vector<Block> blocks;
  for (size_t i = 0; i < def.blocks.size(); ++i) {
    blocks.push_back(build_block(def, i, seed));
    blocks.back().module.ptr()->train();
  }
  auto meter = std::make_shared<MemoryMeter>();
  BlockMemory out;
  out.measured = true;
  {
    MemoryMeter::Install install(meter);
    // The input is allocated before the first scope: the feed's, not a block's.
    LiveSet live(torch::zeros(shape, data.integer_input ? torch::kLong : torch::kFloat));
    for (size_t i = 0; i < blocks.size(); ++i) {
      MemoryMeter::Scope scope(meter.get(), static_cast<int>(i));
      live.run(blocks[i]);
    }
    // Every block's saved tensors are alive now (the graph hangs on the live set): what each keeps.
    for (size_t i = 0; i < blocks.size(); ++i) {
      out.retained_per_example.push_back(static_cast<double>(meter->usage(static_cast<int>(i)).current) / examples);
    }
  }
  return out;
}

}  // namespace pipelab::sim
