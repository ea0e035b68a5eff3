// amoebanet_d: GPipe's Table 1 parameter counts (via torchgpipe, docs/schemes.md, "torchgpipe benchmarks"),
// the pair of states between cells, shapes and torchgpipe's balances.
#include <gtest/gtest.h>

#include <cmath>

#include "models/amoebanet_cell.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::amoebanet_test {
namespace {

using V = std::vector<int>;

int64_t count(int layers, int64_t filters) {
  return testing::parameter_count(
      testing::define_model(fmt::format("{{type: amoebanet_d, layers: {}, filters: {}}}", layers, filters),
                            testing::images(3, 32, 32, 1000)));
}

/// The parameter count of AmoebaNet-D (L, F) with 1000 classes, from six small models.
/// With F = 16k every channel count is a multiple of k (F/4, F/16 for the bottlenecks, F/8
/// for factorized halves), so the count is a quadratic polynomial in k (conv weights are
/// products of two widths; batch norms and the fc are linear; the fc bias is constant):
/// three values of k determine it. And from the third normal cell of a group on, every
/// normal cell is identical, so the count is linear in L/3 >= 2: L = 6 and 9 determine it.
int64_t extrapolated_count(int layers, int64_t filters) {
  const int64_t k = filters / 16;
  auto in_k = [&](int l) {
    const int64_t p1 = count(l, 16), p2 = count(l, 32), p3 = count(l, 48);
    // Lagrange interpolation through k = 1, 2, 3 (each product of two neighbours is even).
    return p1 * ((k - 2) * (k - 3) / 2) - p2 * ((k - 1) * (k - 3)) + p3 * ((k - 1) * (k - 2) / 2);
  };
  const int64_t six = in_k(6), nine = in_k(9);
  return six + (layers / 3 - 2) * (nine - six);
}

TEST(ZooAmoebanet, ParameterCountsMatchGpipeTable1) {
  // The extrapolation is exact: check it against a direct count first.
  EXPECT_EQ(extrapolated_count(12, 64), count(12, 64));
  // docs/schemes.md, "torchgpipe benchmarks"'s table (torchgpipe's counts, which reproduce GPipe's Table 1): 81.5M,
  // 319.0M,
  // 542.7M, 1.06B, 1.84B.
  auto millions = [](int64_t n) { return std::round(static_cast<double>(n) / 1e5) / 10; };
  auto billions = [](int64_t n) { return std::round(static_cast<double>(n) / 1e7) / 100; };
  EXPECT_EQ(millions(extrapolated_count(18, 208)), 81.5);
  EXPECT_EQ(millions(extrapolated_count(18, 416)), 319.0);
  EXPECT_EQ(millions(extrapolated_count(18, 544)), 542.7);
  EXPECT_EQ(billions(extrapolated_count(36, 544)), 1.06);
  EXPECT_EQ(billions(extrapolated_count(72, 512)), 1.84);
  // And the exact value for (18, 208), derived by hand from torchgpipe's code: 81,505,540.
  EXPECT_EQ(extrapolated_count(18, 208), 81505540);
}

TEST(ZooAmoebanet, BlocksAndTorchgpipeBalances) {
  const DataSpec cifar = testing::images(3, 32, 32, 10);
  const ModelDef def = testing::define_model("{type: amoebanet_d, layers: 18, filters: 32}", cifar);
  ASSERT_EQ(def.blocks.size(), 24u);  // L + 6, pipeline-1's [24]
  EXPECT_EQ(testing::block_names(def)[3], "cell1_normal1");
  EXPECT_EQ(testing::block_names(def)[9], "cell2_reduction");
  EXPECT_EQ(def.blocks.back().name, "classify");
  EXPECT_EQ(def.named_balances.at("torchgpipe_2"), (V{16, 8}));
  const ModelDef l36 = testing::define_model("{type: amoebanet_d, layers: 36, filters: 32}", cifar);
  EXPECT_EQ(testing::total(l36.named_balances.at("torchgpipe_4")), 42);
  const ModelDef l72 = testing::define_model("{type: amoebanet_d, layers: 72, filters: 32}", cifar);
  EXPECT_EQ(testing::total(l72.named_balances.at("torchgpipe_8")), 78);
  EXPECT_TRUE(testing::define_model("{type: amoebanet_d, layers: 6, filters: 32}", cifar).named_balances.empty());
}

TEST(ZooAmoebanet, ForwardShapes) {
  std::vector<Block> blocks = testing::build_model(
      testing::define_model("{type: amoebanet_d, layers: 6, filters: 32}", testing::images(3, 32, 32, 10)));
  EXPECT_EQ(testing::forward(blocks, torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
  // After stem1 (8 x 16 x 16) and stem2 (a reduction cell: 3 states of 16 channels at 8 x 8),
  // a cut carries both states, x and prev, as two tensors.
  std::vector<Block> first(blocks.begin(), blocks.begin() + 2);
  const LiveSet live = testing::live_after(first, torch::randn({2, 3, 32, 32}));
  EXPECT_EQ(live.names(), (std::vector<std::string>{"x", "prev"}));
  EXPECT_EQ(live.get("x").sizes(), (std::vector<int64_t>{2, 48, 8, 8}));
  EXPECT_EQ(live.get("prev").sizes(), (std::vector<int64_t>{2, 8, 16, 16}));
  EXPECT_EQ(total_bytes(live.values()), 2 * 4 * (48 * 64 + 8 * 256));
  std::vector<Block> imagenet = testing::build_model(
      testing::define_model("{type: amoebanet_d, layers: 3, filters: 16}", testing::images(3, 224, 224, 1000)));
  EXPECT_EQ(testing::forward(imagenet, torch::randn({1, 3, 224, 224})).sizes(), (std::vector<int64_t>{1, 1000}));
}

TEST(ZooAmoebanet, CellsPassTheirTwoStatesExplicitly) {
  const ModelDef def = testing::define_model("{type: amoebanet_d, layers: 3, filters: 16}", testing::images(3, 32, 32, 10));
  const Dataflow flow = dataflow(def, "amoebanet_d");
  const std::vector<std::string> one{"x"}, pair{"x", "prev"};
  EXPECT_EQ(flow.live[1], one);   // after the stem: one tensor
  EXPECT_EQ(flow.live[2], pair);  // after the first cell: the pair
  EXPECT_EQ(flow.live.back(), pair);
  EXPECT_TRUE(flow.skips.back().empty());
  // A cell returns its output and the s1 it read, unchanged.
  std::vector<Block> blocks = testing::build_model(def);
  const torch::NoGradGuard no_grad;
  // cell1_normal1 reads stem3's output (3 states of 16 channels at 4 x 4) and stem2's.
  const torch::Tensor s1 = torch::randn({2, 48, 4, 4}), s2 = torch::randn({2, 24, 8, 8});
  blocks[3].module.ptr()->eval();
  const Tensors out = call_block(blocks[3], {s1, s2});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(torch::equal(out[1], s1));
}

TEST(ZooAmoebanet, PoolQuirkChangesOutputsNotParameters) {
  const DataSpec cifar = testing::images(3, 32, 32, 10);
  const ModelDef plain = testing::define_model("{type: amoebanet_d, layers: 3, filters: 16}", cifar);
  const ModelDef quirk =
      testing::define_model("{type: amoebanet_d, layers: 3, filters: 16, avg_pool_quirk: true}", cifar);
  std::vector<Block> p = testing::build_model(plain), q = testing::build_model(quirk);
  EXPECT_EQ(testing::parameter_count(p), testing::parameter_count(q));
  const torch::Tensor x = torch::randn({2, 3, 32, 32});
  EXPECT_FALSE(torch::allclose(testing::forward(p, x), testing::forward(q, x)));
}

TEST(ZooAmoebanet, RejectsBadOptions) {
  auto error = [](const std::string& section, const DataSpec& data) {
    return testing::user_error([&] { testing::define_model(section, data); });
  };
  const DataSpec cifar = testing::images(3, 32, 32, 10);
  EXPECT_NE(error("{type: amoebanet_d, layers: 10}", cifar).find("10 is not a multiple of 3"), std::string::npos);
  EXPECT_NE(error("{type: amoebanet_d, filters: 100}", cifar).find("100 is not a multiple of 8"), std::string::npos);
  const std::string size = error("{type: amoebanet_d}", testing::images(3, 48, 48, 10));
  EXPECT_NE(size.find("multiples of 16, got 48x48"), std::string::npos) << size;
  EXPECT_EQ(error("{type: amoebanet_d}", testing::images(3, 31, 63, 10)), "");  // halves rounded up: 16, 32
}

}  // namespace
}  // namespace pipelab::amoebanet_test
