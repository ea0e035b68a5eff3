// Blocks built on the meta device directly (core/model/meta_construction.h): inside the scope
// every factory makes meta tensors and a module's parameters never touch the CPU; outside it,
// nothing changed. A Llama-3-8B embedding (2.1 GB in float32) is built without the process's
// resident memory growing by it.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <torch/torch.h>

#include "core/model/meta_construction.h"
#include "core/model/meta_device.h"
#include "tests/models/zoo.h"

namespace pipelab::meta_construction_test {
namespace {

/// The process's largest resident set so far, in bytes.
int64_t max_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

TEST(MetaConstruction, FactoriesAndModulesMakeMetaTensorsOnlyInsideTheScope) {
  {
    MetaConstruction on_meta;
    EXPECT_TRUE(torch::zeros({3}).is_meta());
    EXPECT_TRUE(torch::arange(5).is_meta());
    EXPECT_TRUE(torch::ones({2}, torch::TensorOptions().pinned_memory(false)).is_meta());
    torch::nn::Linear linear(4, 5);
    EXPECT_TRUE(linear->weight.is_meta());
    EXPECT_TRUE(linear->bias.is_meta());
    EXPECT_EQ(linear->weight.sizes(), (std::vector<int64_t>{5, 4}));
    EXPECT_TRUE(linear->weight.requires_grad());
    {
      MetaConstruction nested;
      EXPECT_TRUE(torch::empty({1}).is_meta());
    }
    EXPECT_TRUE(torch::empty({1}).is_meta()) << "the nested scope's end left the outer one";
  }
  const at::Tensor after = torch::zeros({3});
  EXPECT_TRUE(after.device().is_cpu());
  EXPECT_EQ(after.sum().item<float>(), 0.0F);
}

TEST(MetaConstruction, AnEightBillionParameterModelsEmbeddingIsNeverAllocated) {
  const DataSpec data = testing::word_windows(128256, 4096);
  const ModelDef def = testing::define_model(
      "{type: llama, vocab: 128256, hidden: 4096, intermediate: 14336, layers: 32, heads: 32, kv_heads: 8}", data);
  const int64_t before = max_resident_bytes();
  ProfileBlocks blocks(def, 0, /*meta=*/true);
  const Block embedding = blocks(0);
  int64_t elements = 0;
  for (const at::Tensor& p : embedding.module.ptr()->parameters()) {
    EXPECT_TRUE(p.is_meta());
    elements += p.numel();
  }
  EXPECT_EQ(elements, 128256LL * 4096);
  // 2.1 GB had the embedding been built on the CPU first; the process grows by far less.
  EXPECT_LT(max_resident_bytes() - before, int64_t{256} << 20);
}

}  // namespace
}  // namespace pipelab::meta_construction_test
