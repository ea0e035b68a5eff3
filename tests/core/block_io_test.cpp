// Named tensors between blocks (core/model/block_io.h): the live sets of a block list, each
// malformed list's error, and a stage whose boundaries carry several tensors, one of them
// passed through untouched and one without a gradient (a mask), checked by hand.
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include "core/model/block_io.h"
#include "core/model/model.h"
#include "core/optim/optimizer.h"
#include "core/stage/stage.h"
#include "tests/support/helpers.h"

namespace pipelab::block_io_test {
namespace {

using Names = std::vector<std::string>;
using List = std::vector<std::pair<std::string, BlockIO>>;

TEST(BlockIo, LiveSetsOfAUnetLikeList) {
  const Dataflow f = check_dataflow({{"enc1", stashes({"skip1"})},
                                     {"enc2", stashes({"skip2"})},
                                     {"mid", BlockIO{}},
                                     {"dec2", pops({"skip2"})},
                                     {"dec1", pops({"skip1"})}},
                                    "m");
  ASSERT_EQ(f.live.size(), 6u);
  EXPECT_EQ(f.live[0], (Names{"x"}));
  EXPECT_EQ(f.live[2], (Names{"x", "skip1", "skip2"}));
  EXPECT_EQ(f.skips[3], (Names{"skip1", "skip2"}));
  EXPECT_EQ(f.live[4], (Names{"x", "skip1"}));
  EXPECT_EQ(f.live[5], (Names{"x"}));
  EXPECT_FALSE(f.plain());
  EXPECT_TRUE(check_dataflow({{"a", BlockIO{}}, {"b", BlockIO{}}}, "m").plain());
  // A name that is not a skip stays live to the end (a mask), and a block may replace it.
  const Dataflow mask = check_dataflow({{"embed", reads({"x"}, {"x", "mask"})}, {"layer", reads({"x", "mask"})}}, "m");
  EXPECT_EQ(mask.live.back(), (Names{"x", "mask"}));
}

TEST(BlockIo, MalformedListsAreClearErrors) {
  const auto error = [](const List& blocks) { return testing::user_error([&] { check_dataflow(blocks, "toy"); }); };
  const std::string no_stash = error({{"a", BlockIO{}}, {"dec", pops({"skip1"})}});
  EXPECT_NE(no_stash.find("model toy: block 'dec': reads 'skip1', which is not live here (live: x)"), std::string::npos)
      << no_stash;
  EXPECT_NE(no_stash.find("stash it in an earlier block"), std::string::npos) << no_stash;
  // A pop naming a live tensor that is no skip connection.
  BlockIO pop_mask = pops({"mask"});
  const std::string not_skip = error({{"embed", reads({"x"}, {"x", "mask"})}, {"dec", pop_mask}});
  EXPECT_NE(not_skip.find("pops 'mask', which no earlier block stashed"), std::string::npos) << not_skip;
  // Popped twice.
  const std::string twice = error({{"a", stashes({"s"})}, {"b", pops({"s"})}, {"c", pops({"s"})}});
  EXPECT_NE(twice.find("block 'c': reads 's', which is not live here"), std::string::npos) << twice;
  EXPECT_NE(twice.find("pop a skip connection once"), std::string::npos) << twice;
  // Names are unique while live.
  const std::string dup = error({{"a", stashes({"s"})}, {"b", stashes({"s"})}, {"c", pops({"s"})}});
  EXPECT_NE(dup.find("block 'b': stashes 's', which is already live"), std::string::npos) << dup;
  EXPECT_NE(error({{"a", stashes({"s"})}, {"b", BlockIO{}}}).find("skip connection(s) s stashed but never popped"),
            std::string::npos);
  EXPECT_NE(error({{"a", stashes({"s"})}, {"b", reads({"x"}, {"s"})}, {"c", pops({"s"})}})
                .find("overwrites 's', a skip connection in transit"),
            std::string::npos);
  BlockIO stash_x;
  stash_x.stash = {"x"};
  EXPECT_NE(error({{"a", stash_x}}).find("stashes 'x', the main tensor"), std::string::npos);
  EXPECT_NE(error({{"a", reads({"x", "x"})}}).find("reads 'x' twice"), std::string::npos);
}

/// (h, s) -> h * s + w: a block reading two tensors.
struct MulAddImpl : torch::nn::Module {
  MulAddImpl() { w = register_parameter("w", at::full({1}, 0.5, at::kDouble)); }
  at::Tensor forward(const at::Tensor& h, const at::Tensor& s) { return h * s + w; }
  at::Tensor w;
};
TORCH_MODULE(MulAdd);

/// x -> {x * v, mask}: writes a second, boolean tensor.
struct ScaleImpl : torch::nn::Module {
  ScaleImpl() { v = register_parameter("v", at::full({1}, 3.0, at::kDouble)); }
  std::vector<at::Tensor> forward(const at::Tensor& x) { return {x * v, x.gt(0)}; }
  at::Tensor v;
};
TORCH_MODULE(Scale);

TEST(BlockIo, AStageSendsAndReceivesSeveralTensorsWithTheirGradients) {
  // Stage 1 of three: receives (x, s, mask), where s is a skip connection it carries on
  // untouched; its block computes x' = x * s + w. Gradients by hand for dy = (g, gs, -).
  StageSpec spec;
  spec.index = 1;
  spec.count = 3;
  spec.blocks.push_back({"muladd", torch::nn::AnyModule(MulAdd()), reads({"x", "s"})});
  spec.inputs = {"x", "s", "mask"};
  spec.outputs = {"x", "s", "mask"};
  Stage stage(std::move(spec));
  const at::Tensor x = at::tensor({1.0, -2.0}, at::kDouble), s = at::tensor({3.0, 4.0}, at::kDouble);
  const at::Tensor mask = x.gt(0);
  const ForwardResult r = stage.forward(0, Tensors{x, s, mask});
  ASSERT_EQ(r.activations.size(), 3u);
  EXPECT_TRUE(r.activations[0].equal(at::tensor({3.5, -7.5}, at::kDouble)));
  EXPECT_TRUE(r.activations[1].equal(s));
  EXPECT_TRUE(r.activations[2].equal(mask));
  const at::Tensor g = at::tensor({1.0, 10.0}, at::kDouble), gs = at::tensor({100.0, 1000.0}, at::kDouble);
  const Tensors dx = stage.backward(0, Tensors{g, gs, at::Tensor()});
  ASSERT_EQ(dx.size(), 3u);
  EXPECT_TRUE(dx[0].equal(g * s));       // d(x s + w)/dx = s
  EXPECT_TRUE(dx[1].equal(gs + g * x));  // carried on, and read by the block
  EXPECT_FALSE(dx[2].defined());         // a mask has no gradient
  EXPECT_DOUBLE_EQ(stage.parameters()[0].grad().item<double>(), 11.0);
  EXPECT_EQ(stage.input_names(), (Names{"x", "s", "mask"}));
}

TEST(BlockIo, TheSplitBackwardGivesTheWholeBackwardsGradients) {
  const auto make = [] {
    StageSpec spec;
    spec.index = 1;
    spec.count = 3;
    spec.blocks.push_back({"scale", torch::nn::AnyModule(Scale()), reads({"x"}, {"x", "m"})});
    spec.blocks.push_back({"muladd", torch::nn::AnyModule(MulAdd()), reads({"x", "s"})});
    spec.inputs = {"x", "s"};
    spec.outputs = {"x", "s", "m"};
    return std::make_unique<Stage>(std::move(spec));
  };
  const at::Tensor x = at::tensor({1.0, -2.0}, at::kDouble), s = at::tensor({3.0, 4.0}, at::kDouble);
  const Tensors dy{at::tensor({1.0, 2.0}, at::kDouble), at::tensor({5.0, 6.0}, at::kDouble), at::Tensor()};
  auto whole = make(), split = make();
  whole->forward(0, Tensors{x, s});
  split->forward(0, Tensors{x, s});
  const Tensors a = whole->backward(0, dy);
  const Tensors b = split->backward_input(0, dy);
  split->backward_weight(0);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(a[i].equal(b[i])) << i;
  EXPECT_TRUE(a[0].equal(dy[0] * 3.0 * s));  // x' = 3 x s + w
  EXPECT_TRUE(a[1].equal(dy[1] + dy[0] * 3.0 * x));
  for (size_t p = 0; p < 2; ++p) EXPECT_TRUE(whole->parameters()[p].grad().equal(split->parameters()[p].grad())) << p;
}

}  // namespace
}  // namespace pipelab::block_io_test
