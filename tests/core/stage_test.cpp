// The Stage on its own: a model cut in two gives the gradients of the whole; recomputation
// (checkpointing) replays dropout masks exactly; forward/backward bookkeeping.
#include <gtest/gtest.h>

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include "core/nn/dropout.h"
#include "core/stage/stage.h"
#include "tests/support/helpers.h"

namespace pipelab::stage_test {
namespace {

/// linear -> tanh -> dropout
struct TestBlockImpl : torch::nn::Module {
  explicit TestBlockImpl(double p) {
    linear = register_module("linear", torch::nn::Linear(6, 6));
    dropout = register_module("dropout", nn::Dropout(p));
  }
  at::Tensor forward(const at::Tensor& x) { return dropout(torch::tanh(linear(x))); }
  torch::nn::Linear linear{nullptr};
  nn::Dropout dropout{nullptr};
};
TORCH_MODULE(TestBlock);

std::vector<Block> blocks(uint64_t seed, double dropout) {
  torch::manual_seed(seed);
  std::vector<Block> out;
  for (int i = 0; i < 4; ++i) {
    TestBlock b(dropout);
    b->to(at::kDouble);
    out.push_back({"b" + std::to_string(i), torch::nn::AnyModule(b)});
  }
  return out;
}

/// Runs one forward/backward of x through stages cut as `cut`; returns all parameter
/// gradients in order.
std::vector<at::Tensor> gradients(const std::vector<int>& cut, bool checkpoint, double dropout) {
  std::vector<Block> all = blocks(1, dropout);
  std::vector<std::unique_ptr<Stage>> stages;
  size_t next = 0;
  for (size_t r = 0; r < cut.size(); ++r) {
    StageSpec spec;
    spec.index = static_cast<int>(r);
    spec.count = static_cast<int>(cut.size());
    spec.first_block = next;
    for (int k = 0; k < cut[r]; ++k) spec.blocks.push_back(all[next++]);
    spec.loss = r + 1 == cut.size() ? std::make_shared<CrossEntropyLoss>() : nullptr;
    spec.seed = 5;
    stages.push_back(std::make_unique<Stage>(std::move(spec)));
    stages.back()->set_training(true);
  }
  torch::manual_seed(2);
  const at::Tensor x = at::randn({8, 6}, at::kDouble);
  const at::Tensor y = at::randint(6, {8}, at::kLong);
  at::Tensor h = x;
  for (auto& s : stages) {
    ForwardOptions o;
    o.checkpoint = checkpoint;
    if (s->is_last()) o.target = y;
    h = s->forward(0, h, o).activation();
  }
  at::Tensor dy;
  for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
    EXPECT_EQ((*it)->in_flight(), 1u);
    dy = (*it)->backward(0, dy);
    EXPECT_EQ((*it)->in_flight(), 0u);
    EXPECT_EQ(dy.defined(), !(*it)->is_first());
  }
  std::vector<at::Tensor> g;
  for (auto& s : stages) {
    for (const auto& p : s->parameters()) g.push_back(p.grad().clone());
  }
  return g;
}

void expect_same(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << "parameter " << i;
}

TEST(Stage, SplitGivesTheGradientsOfTheWhole) {
  expect_same(gradients({4}, false, 0), gradients({1, 3}, false, 0));
  expect_same(gradients({4}, false, 0), gradients({1, 1, 1, 1}, false, 0));
}

TEST(Stage, DropoutMasksDependOnlyOnTheBlock) {
  // Per-block generators: the same masks however the model is cut.
  expect_same(gradients({4}, false, 0.3), gradients({2, 2}, false, 0.3));
}

TEST(Stage, RecomputationReplaysTheSameDropoutMasks) {
  expect_same(gradients({2, 2}, false, 0.3), gradients({2, 2}, true, 0.3));
}

TEST(Stage, BackwardWithoutForwardIsAnInternalError) {
  StageSpec spec;
  spec.blocks = blocks(1, 0);
  spec.loss = std::make_shared<CrossEntropyLoss>();
  Stage s(std::move(spec));
  EXPECT_THROW(s.backward(3, at::Tensor()), InternalError);
}

}  // namespace
}  // namespace pipelab::stage_test
