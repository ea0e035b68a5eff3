// Weight predictors against docs/schemes.md, "One-step predictions" (one-step values derived from the
// predictor formulas of SpecTrain, docs/schemes.md, "spectrain version 1", and PipeOptim, docs/schemes.md, "pipeoptim")
// and the swap mechanism they rely on.
#include <gtest/gtest.h>

#include <torch/nn/module.h>

#include "core/weights/weights.h"
#include "tests/support/helpers.h"

namespace pipelab::prediction_test {
namespace {

struct OneWeightImpl : torch::nn::Module {
  OneWeightImpl() { w = register_parameter("w", at::ones({1}, at::kDouble)); }
  at::Tensor forward(const at::Tensor& x) { return x * w; }
  at::Tensor w;
};
TORCH_MODULE(OneWeight);

class SumLoss : public Loss {
 public:
  at::Tensor compute(const at::Tensor& out, const at::Tensor&) const override { return out.sum(); }
};

std::unique_ptr<Stage> one_weight_stage(const std::string& optimizer) {
  StageSpec spec;
  spec.blocks = {{"p", torch::nn::AnyModule(OneWeight())}};
  spec.loss = std::make_shared<SumLoss>();
  auto stage = std::make_unique<Stage>(std::move(spec));
  auto source = std::make_shared<ConfigSource>("t");
  stage->set_optimizer(Registry<OptimizerFactory>::get().create(ConfigNode(YAML::Load(optimizer), source, "o"))->make(stage->parameters()));
  return stage;
}

double predicted(Stage& stage, double steps, const DirectionRequest& request) {
  return predict_weights(stage, 0.1, steps, request)[0].item<double>();
}

TEST(Prediction, SgdOneStepTable) {
  // W_t = 1, v_t = 0.5, G_t = 0.2, lr 0.1, mu 0.9, D = 4: two steps with gradients 1/3 and
  // 0.2 leave v = 0.9/3 + 0.2 = 0.5 and G = 0.2; then W is reset to 1.
  auto stage = one_weight_stage("{type: sgd, lr: 0.1, momentum: 0.9}");
  at::Tensor w = stage->parameters()[0];
  for (double g : {1.0 / 3, 0.2}) {
    w.mutable_grad() = at::full({1}, g, at::kDouble);
    stage->optimizer().step();
    stage->optimizer().zero_grad();
  }
  write_weights(*stage, {at::ones({1}, at::kDouble)});
  const DirectionRequest buffer{}, ahead{DirectionRequest::Kind::OneStepAhead, true, std::nullopt},
      momentum{DirectionRequest::Kind::MomentumOnly, true, std::nullopt};
  // Per stage r: v1 s_f = floor(r/2) + 3 - r, s_b = floor(r/2); PipeOptim s = 4 - r (code), 3 - r (paper).
  const double v1_code_fwd[] = {0.805, 0.870, 0.870, 0.935}, v1_code_bwd[] = {1.000, 1.000, 0.955, 0.955};
  const double v1_paper_fwd[] = {0.85, 0.90, 0.90, 0.95}, v1_paper_bwd[] = {1.00, 1.00, 0.95, 0.95};
  const double po_code[] = {0.740, 0.805, 0.870, 0.935}, po_paper[] = {0.85, 0.90, 0.95, 1.00};
  for (int r = 0; r < 4; ++r) {
    const double s_f = r / 2 + 3 - r, s_b = r / 2;
    EXPECT_NEAR(predicted(*stage, s_f, ahead), v1_code_fwd[r], 1e-15) << r;
    EXPECT_NEAR(predicted(*stage, s_b, momentum), v1_code_bwd[r], 1e-15) << r;
    EXPECT_NEAR(predicted(*stage, s_f, buffer), v1_paper_fwd[r], 1e-15) << r;
    EXPECT_NEAR(predicted(*stage, s_b, buffer), v1_paper_bwd[r], 1e-15) << r;
    EXPECT_NEAR(predicted(*stage, 4 - r, ahead), po_code[r], 1e-15) << r;
    EXPECT_NEAR(predicted(*stage, 3 - r, buffer), po_paper[r], 1e-15) << r;
  }
}

TEST(Prediction, AdamTableF15AndTheHardCodedEpsilon) {
  // W = 1, m_t = 0.1, u_t = 0.01, t = 1, lr 1e-3; a group eps of 1e-3 tells the released
  // code's hard-coded 1e-8 apart from the optimizer's own.
  auto stage = one_weight_stage("{type: adam, lr: 0.001, eps: 0.001}");
  stage->optimizer().load_state({{"0.exp_avg", at::full({1}, 0.1, at::kDouble)}, {"0.exp_avg_sq", at::full({1}, 0.01, at::kDouble)}});
  stage->optimizer().set_steps(1);
  const double code[] = {0.998735089, 0.999051317, 0.999367544, 0.999683772};  // s = 4, 3, 2, 1
  const DirectionRequest reference{DirectionRequest::Kind::OneStepAhead, true, 1e-8};
  for (int k = 0; k < 4; ++k) {
    EXPECT_NEAR(predict_weights(*stage, 1e-3, 4 - k, reference)[0].item<double>(), code[k], 1e-9);
    // With the group eps: m_hat / (sqrt(u_hat) + 1e-3) = 1 / (sqrt(10) + 1e-3).
    EXPECT_NEAR(predict_weights(*stage, 1e-3, 4 - k, {})[0].item<double>(), 1 - 1e-3 * (4 - k) / (std::sqrt(10.0) + 1e-3),
                1e-12);
  }
}

TEST(Prediction, NothingBeforeTheFirstGradientAndSwapsRestore) {
  auto stage = one_weight_stage("{type: sgd, lr: 0.1, momentum: 0.9}");
  // No update yet, so no prediction (docs/schemes.md, "Notation and optimizers").
  EXPECT_EQ(predicted(*stage, 3, {}), 1.0);
  WeightSwap swap(*stage);
  swap.swap_in({at::full({1}, 7.0, at::kDouble)});
  EXPECT_EQ(stage->parameters()[0].item<double>(), 7.0);
  const int64_t version = stage->parameters()[0]._version();
  swap.restore();
  EXPECT_EQ(stage->parameters()[0].item<double>(), 1.0);
  // No autograd version bump (docs/schemes.md, "Notation and optimizers").
  EXPECT_EQ(stage->parameters()[0]._version(), version);
}

}  // namespace
}  // namespace pipelab::prediction_test
