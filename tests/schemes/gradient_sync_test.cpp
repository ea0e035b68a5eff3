/// Cross-stage collectives (docs/schemes.md, "Notation and optimizers"): the global gradient-norm clip and tied
/// weights across stages, against the hand-computed clip-and-tie oracle of docs/schemes.md, "Notation and optimizers"
/// and against `single` on the whole model.
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <cmath>
#include <future>

#include "core/comm/gradient_finish.h"
#include "core/config/registry.h"
#include "core/io/pt_file.h"
#include "core/model/model.h"
#include "core/processes/process_group.h"
#include "core/run/runner.h"
#include "tests/support/helpers.h"
#include "tests/support/scheme_cases.h"

namespace pipelab::gradient_sync_test {
namespace {

at::Tensor vec(std::vector<double> v) { return at::tensor(v, at::kDouble); }

double at0(const at::Tensor& t, int64_t i) { return t.reshape({-1})[i].item<double>(); }

GradientPlan two_stages() {
  GradientPlan plan;
  plan.members = {{0, 0}, {1, 0}};
  plan.clip_max_norm = 1;
  return plan;
}

TEST(FinishGradients, GlobalClipIsTorchsClipOverTheWholeModel) {
  // The clip-and-tie oracle (docs/schemes.md, "Notation and optimizers"): stage 0's gradient (3, 0), stage 1's (4); T =
  // 5, c = 1 / (5 + 1e-6).
  const auto out = finish_gradients({{vec({3, 0})}, {vec({4})}}, two_stages());
  const double c = 1 / (5 + 1e-6);
  EXPECT_NEAR(c, 0.19999996, 1e-8);
  EXPECT_DOUBLE_EQ(at0(out[0][0], 0), 3 * c);
  EXPECT_DOUBLE_EQ(at0(out[0][0], 1), 0);
  EXPECT_DOUBLE_EQ(at0(out[1][0], 0), 4 * c);
  GradientPlan per_stage = two_stages();
  per_stage.clip_per_stage = true;  // AsyncPP's clipping: c = 1/(3 + 1e-6) and 1/(4 + 1e-6)
  const auto each = finish_gradients({{vec({3, 0})}, {vec({4})}}, per_stage);
  EXPECT_NEAR(at0(each[0][0], 0) / 3, 0.333333222, 1e-9);
  EXPECT_NEAR(at0(each[1][0], 0) / 4, 0.2499999375, 1e-10);
  GradientPlan per_tensor = two_stages();
  // Chimera's per-tensor clip (docs/schemes.md, "Quirks"): stage 0's two tensors (3, 0) and (4) each by its own
  per_tensor.clip_per_tensor = true;
  const auto tensors = finish_gradients({{vec({3, 0}), vec({4})}, {vec({0.5})}}, per_tensor);
  EXPECT_DOUBLE_EQ(at0(tensors[0][0], 0), 3 / (3 + 1e-6));
  EXPECT_DOUBLE_EQ(at0(tensors[0][1], 0), 4 / (4 + 1e-6));
  EXPECT_DOUBLE_EQ(at0(tensors[1][0], 0), 0.5);  // within its norm: unchanged
  GradientPlan inf = two_stages();
  inf.clip_norm_type = INFINITY;  // T = 4
  EXPECT_DOUBLE_EQ(at0(finish_gradients({{vec({3, 0})}, {vec({4})}}, inf)[1][0], 0), 4 / (4 + 1e-6));
  GradientPlan loose = two_stages();
  loose.clip_max_norm = 100;  // c = 1: the gradients are multiplied by 1, unchanged
  EXPECT_DOUBLE_EQ(at0(finish_gradients({{vec({3, 0})}, {vec({4})}}, loose)[0][0], 0), 3);
}

TEST(FinishGradients, TiedCopiesSumAndCountOnceInTheNorm) {
  // The oracle's split (docs/schemes.md, "Notation and optimizers"): first copy dE = (1.5, 0) with dw = 0.375 on stage
  // 0, last copy (-0.5, -1).
  GradientPlan plan = two_stages();
  plan.ties = {{0, 0, 1, 0}};
  plan.clip_max_norm = 0;
  const std::vector<std::vector<at::Tensor>> grads{{vec({1.5, 0}), vec({0.375})}, {vec({-0.5, -1})}};
  const auto summed = finish_gradients(grads, plan);
  for (const auto& g : {summed[0][0], summed[1][0]}) {
    EXPECT_DOUBLE_EQ(at0(g, 0), 1);
    EXPECT_DOUBLE_EQ(at0(g, 1), -1);
  }
  plan.clip_max_norm = 1;  // T = 1.46308748884 (the tie once), c = 0.68348565902
  const auto clipped = finish_gradients(grads, plan);
  EXPECT_NEAR(at0(clipped[0][0], 0), 0.68348565902, 1e-10);
  EXPECT_NEAR(at0(clipped[1][0], 1), -0.68348565902, 1e-10);
  EXPECT_NEAR(at0(clipped[0][1], 0), 0.375 * 0.68348565902, 1e-10);
  plan.sum_ties = false;  // PipeDream-2BW's code (docs/schemes.md, "Quirks"): each copy keeps its own gradient
  plan.clip_max_norm = 0;
  const auto separate = finish_gradients(grads, plan);
  EXPECT_DOUBLE_EQ(at0(separate[0][0], 0), 1.5);
  EXPECT_DOUBLE_EQ(at0(separate[1][0], 0), -0.5);
}

TEST(FinishGradients, ReplicasSumBeforeTheClip) {
  GradientPlan plan;
  plan.members = {{0, 0}, {0, 1}};
  plan.clip_max_norm = 1;
  const auto out = finish_gradients({{vec({1, 0})}, {vec({2, 4})}}, plan);  // sum (3, 4): T = 5
  EXPECT_TRUE(out[0][0].equal(out[1][0]));
  EXPECT_DOUBLE_EQ(at0(out[0][0], 1), 4 / (5 + 1e-6));
}

// The clip-and-tie oracle of docs/schemes.md, "Notation and optimizers" as a model: stage 0 ("embed") looks up E[0] of
// the embedding E = (0.5, -1) and multiplies by w = 2; stage 1 ("project") is z = E u with its copy of
// E; the loss is 1/2 |z - (1, 0)|^2 (the target is fixed: every example is token 0 with target
// (1, 0)).
struct EmbedImpl : torch::nn::Module {
  EmbedImpl() {
    E = register_parameter("E", at::tensor({0.5, -1.0}, at::kDouble).view({2, 1}));
    w = register_parameter("w", at::tensor({2.0}, at::kDouble));
  }
  at::Tensor forward(const at::Tensor& x) { return (E[0] * w).expand({x.size(0), 1}); }
  at::Tensor E, w;
};
TORCH_MODULE(Embed);

struct ProjectImpl : torch::nn::Module {
  // Zero-filled, as Megatron's last-stage copy: the run must copy the first into it.
  ProjectImpl() { E = register_parameter("E", at::zeros({2, 1}, at::kDouble)); }
  at::Tensor forward(const at::Tensor& u) { return at::matmul(u, E.t()); }
  at::Tensor E;
};
TORCH_MODULE(Project);

class HalfSquaredError : public Loss {
 public:
  at::Tensor compute(const at::Tensor& z, const at::Tensor&) const override {
    const at::Tensor t = at::tensor({1.0, 0.0}, z.options()).expand_as(z);
    return (0.5 * (z - t).pow(2).sum(1)).mean();
  }
};

struct NoOptions {
  template <class V>
  void fields(V&) {}
};

class TiedOracle : public Configured<ModelFactory, NoOptions> {
 public:
  using Configured::Configured;
  bool ties_weights() const override { return true; }
  ModelDef define(const DataSpec&) const override {
    ModelDef def;
    def.blocks.push_back({"embed", [] { return torch::nn::AnyModule(Embed()); }});
    def.blocks.push_back({"project", [] { return torch::nn::AnyModule(Project()); }});
    def.loss = std::make_shared<HalfSquaredError>();
    def.ties = {{"embed.E", "project.E"}};
    return def;
  }
};
PIPELAB_REGISTER(ModelFactory, TiedOracle, "test_tied_oracle", "O23's tied-embedding model (tests only)");

const char* kTied = R"(
model:     {type: test_tied_oracle}
dataset:   {type: synthetic, samples: 4, test_samples: 2, shape: [1], classes: 2}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.1}
run:       {epochs: 1, batch_size: 4, seed: 1, dtype: float64}
)";

at::Tensor named(const TensorDict& d, const std::string& name) {
  for (const auto& [key, t] : d) {
    if (key == name) return t;
  }
  ADD_FAILURE() << "no " << name;
  return at::zeros({2}, at::kDouble);
}

void expect_weights(const TensorDict& w, std::vector<double> first, std::vector<double> last, double wv) {
  const at::Tensor a = named(w, "embed.E");
  const at::Tensor b = named(w, "project.E");
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(at0(a, i), first[static_cast<size_t>(i)], 1e-12);
    EXPECT_NEAR(at0(b, i), last[static_cast<size_t>(i)], 1e-12);
  }
  EXPECT_NEAR(at0(named(w, "embed.w"), 0), wv, 1e-12);
}

TEST(TiedWeights, AcrossStagesTheCopiesStepAsOneParameter) {
  // The oracle (docs/schemes.md, "Notation and optimizers") with SGD eta = 0.1: both copies (0.4, -0.9);
  // w = 2 - 0.1 x 0.375.
  for (const std::vector<std::string> o : std::vector<std::vector<std::string>>{
           {}, {"scheme={type: single}"}, {"run.executor={type: threaded, intra_op_threads: 1}"},
           {"partition.replicas=2"}}) {
    SCOPED_TRACE(o.empty() ? "gpipe" : o.front());
    expect_weights(testing::train(kTied, o), {0.4, -0.9}, {0.4, -0.9}, 2 - 0.1 * 0.375);
  }
  // PipeDream-2BW's code (its skipped tied-weight all-reduce, docs/schemes.md, "Quirks"): the copies step
  // apart.
  expect_weights(testing::train(kTied, {"optimizer.tied_gradients=separate"}), {0.35, -1.0}, {0.55, -0.9},
                 2 - 0.1 * 0.375);
}

/// `yaml` trained by two ranks of the distributed executor (one stage each), as `pipelab
/// launch` starts them, on threads of this process; the writing rank's final weights.
TensorDict train_on_two_ranks(const std::string& yaml, const std::vector<std::string>& overrides) {
  testing::TempDir dir;
  const int port = dist::free_port();
  std::vector<std::future<void>> ranks;
  for (int p = 0; p < 2; ++p) {
    ranks.push_back(std::async(std::launch::async, [&, p] {
      std::vector<std::string> o = overrides;
      o.push_back(fmt::format("run.executor={{type: distributed, rank: {}, world_size: 2, master: '127.0.0.1:{}', "
                              "timeout_s: 60, intra_op_threads: 1}}",
                              p, port));
      Experiment e = testing::experiment(yaml, dir.file("run"), o);
      RunnerOptions options;
      options.quiet = true;
      Runner(e, options).run();
    }));
  }
  for (auto& r : ranks) r.get();
  return load_tensor_dict(dir.file("run/checkpoints/final.pt"));
}

TEST(TiedWeights, AcrossTwoProcessesTheCopiesStepAsOneParameter) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  // The oracle as above, the two copies on two ranks: their gradients meet in a c10d subgroup.
  expect_weights(train_on_two_ranks(kTied, {}), {0.4, -0.9}, {0.4, -0.9}, 2 - 0.1 * 0.375);
  expect_weights(train_on_two_ranks(kTied, {"optimizer.clip_grad_norm=1"}), {0.431651434098, -0.931651434098},
                 {0.431651434098, -0.931651434098}, 1.974369287787);
}

TEST(TiedWeights, TheClipCountsTheTieOnce) {
  // The oracle (docs/schemes.md, "Notation and optimizers"): c = 0.68348565902, E = (0.431651434098, -0.931651434098),
  // w = 1.974369287787.
  for (const std::string scheme : {"{type: gpipe, chunks: 2}", "{type: single}"}) {
    expect_weights(testing::train(kTied, {"scheme=" + scheme, "optimizer.clip_grad_norm=1"}),
                   {0.431651434098, -0.931651434098}, {0.431651434098, -0.931651434098}, 1.974369287787);
  }
}

// 4 blocks, float64; a clip of 0.05 is active at every step.
const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9, clip_grad_norm: 0.05}
run:       {epochs: 2, batch_size: 16, seed: 3, dtype: float64}
)";

TEST(GlobalClip, SynchronousSchemesEqualSingleWithTheSameClip) {
  const TensorDict single = testing::train(kMlp);
  EXPECT_GT(testing::max_difference(single, testing::train(kMlp, {"optimizer.clip_grad_norm=null"})), 1e-3)
      << "the clip should be active";
  const std::vector<std::vector<std::string>> cases{
      {"scheme={type: gpipe, chunks: 4}"},
      {"scheme={type: pipedream_flush, chunks: 4}"},
      {"scheme={type: zb_h1, chunks: 4}"},
      {"scheme={type: gpipe, chunks: 2}", "partition.replicas=2"},
      {"scheme={type: gpipe, chunks: 4}", "partition.stages=4", "run.executor={type: threaded, intra_op_threads: 1}"},
      {"partition.replicas=2"},
  };
  for (const std::vector<std::string>& o : cases) {
    EXPECT_LT(testing::max_difference(single, testing::train(kMlp, o)), 1e-10) << o.front();
  }
  // Two stages on one device join the model-wide collective once, at the first of them
  // (core/schedule/dataflow.h): sequential, threaded, and a V-shaped placement.
  for (const std::vector<std::string>& o : std::vector<std::vector<std::string>>{
           {"scheme={type: interleaved_1f1b, chunks: 4, virtual_stages: 2}", "partition.stages=4"},
           {"scheme={type: interleaved_1f1b, chunks: 4, virtual_stages: 2}", "partition.stages=4",
            "run.executor={type: threaded, intra_op_threads: 1}"},
           {"scheme={type: zbv, chunks: 4}", "partition.stages=4", "run.executor={type: threaded, intra_op_threads: 1}"},
       }) {
    EXPECT_LT(testing::max_difference(single, testing::train(kMlp, o)), 1e-10) << o.front() << " " << o.back();
  }
  // Per-stage clipping (AsyncPP) is another run.
  EXPECT_GT(testing::max_difference(single, testing::train(kMlp, {"scheme={type: gpipe, chunks: 4}",
                                                                  "optimizer.clip_scope=per_stage"})),
            1e-6);
}

TEST(GlobalClip, BadOptionsAreClearErrors) {
  const std::string negative = testing::user_error([] { testing::train(kMlp, {"optimizer.clip_grad_norm=-1"}); });
  EXPECT_NE(negative.find("optimizer.clip_grad_norm"), std::string::npos) << negative;
  const std::string norm = testing::user_error([] { testing::train(kMlp, {"optimizer.clip_norm_type=two"}); });
  EXPECT_NE(norm.find("optimizer.clip_norm_type"), std::string::npos) << norm;
  EXPECT_NE(norm.find("inf"), std::string::npos) << norm;
  const std::string unknown = testing::user_error([] { testing::train(kMlp, {"optimizer.clip_grad=1"}); });
  EXPECT_NE(unknown.find("clip_grad"), std::string::npos) << unknown;
}

// Every registered scheme: a clip too large to act changes no bit (the collective before
// each update leaves the gradients as they are), and a small one reaches the gradients
// each update applies.
class ClipEveryScheme : public ::testing::TestWithParam<testing::SchemeCase> {};

const char* kSmall = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 32, test_samples: 8, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 1, batch_size: 16, seed: 3, threads: 1}
)";

TEST_P(ClipEveryScheme, ALooseClipChangesNothingAndATightOneActs) {
  const testing::SchemeCase& c = GetParam();
  if (c.stages != 2) GTEST_SKIP() << "2 stages only";
  std::vector<std::string> common{"scheme=" + c.scheme, "partition.stages=2"};
  const auto with = [&](const std::string& clip) {
    std::vector<std::string> o = common;
    if (!clip.empty()) o.push_back("optimizer.clip_grad_norm=" + clip);
    return testing::train(kSmall, o);
  };
  const TensorDict plain = with("");
  EXPECT_TRUE(testing::identical(plain, with("1e9")));
  EXPECT_GT(testing::max_difference(plain, with("1e-4")), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Registry, ClipEveryScheme, ::testing::ValuesIn(testing::scheme_cases()),
                         testing::scheme_case_name);

}  // namespace
}  // namespace pipelab::gradient_sync_test
