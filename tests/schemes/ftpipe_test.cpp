// The `ftpipe` scheme (schemes/ftpipe.cpp): FTPipe's predictors against their oracles
// (float64, docs/schemes.md, "Numbered oracles"), Gap-Aware inside it against Gap-Aware's oracles there,
// and its equivalences: one stage is `single`; no predictor with the stash is `pipedream`;
// msnag without momentum predicts nothing; the reference code's aliased stash (docs/schemes.md
// docs/schemes.md, "Quirks") is no stash.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "schemes/ftpipe.h"
#include "tests/schemes/toy_pipeline.h"
#include "tests/support/helpers.h"

namespace pipelab::ftpipe_test {
namespace {

at::Tensor scalar(double x) { return at::full({1}, x, at::kDouble); }

double sgd_prediction(double decay, int n, double momentum = 0.9) {
  const Optimizer::SgdSettings sgd{momentum, 0, decay, false};
  return ftpipe::predict_sgd(scalar(1), scalar(0.5), at::Tensor(), sgd,
                             std::vector<double>(static_cast<size_t>(n), 0.1))
      .item<double>();
}

TEST(Ftpipe, MsnagMatchesO10) {
  // msnag (docs/schemes.md, "ftpipe"): W = 1, v = 0.5, lr 0.1, mu 0.9: W - lr c_n v with
  // c_n = 0.9, 1.71, 2.439.
  const double c[] = {0.9, 1.71, 2.439}, w[] = {0.955, 0.9145, 0.87805};
  for (int n = 1; n <= 3; ++n) {
    EXPECT_NEAR(ftpipe::msnag_coefficient(0.9, n), c[n - 1], 1e-12) << n;
    EXPECT_NEAR(sgd_prediction(0, n), w[n - 1], 1e-12) << n;
    EXPECT_NEAR(1 - 0.1 * ftpipe::msnag_coefficient(0.9, n) * 0.5, w[n - 1], 1e-12) << n;
  }
  // Without momentum msnag predicts nothing.
  EXPECT_EQ(sgd_prediction(0, 3, 0), 1.0);
}

TEST(Ftpipe, AggmsnagWithDecayMatchesO11) {
  // aggmsnag (docs/schemes.md, "ftpipe"), lambda = 0.01, phi = 0: n simulated torch-SGD steps; n = 1 is
  // W (1 - lr lambda) - lr mu v. (The oracle of docs/schemes.md, "Numbered oracles" prints n = 3 rounded to 0.87261575;
  // unrounded it is 0.872615754.)
  const double w[] = {0.954, 0.911646, 0.872615754};
  for (int n = 1; n <= 3; ++n) EXPECT_NEAR(sgd_prediction(0.01, n), w[n - 1], 1e-12) << n;
  // The accumulated gradient enters the first step: phi = 0.2 adds lr (1 - tau) phi = 0.02.
  const Optimizer::SgdSettings sgd{0.9, 0, 0.01, false};
  EXPECT_NEAR(ftpipe::predict_sgd(scalar(1), scalar(0.5), scalar(0.2), sgd, {0.1}).item<double>(), 0.934, 1e-12);
  // nag_with_predictor: W - lr mu v - lr phi = 1 - 0.045 - 0.02.
  EXPECT_NEAR(ftpipe::predict_nag(scalar(1), scalar(0.5), scalar(0.2), 0.9, 0.1).item<double>(), 0.935, 1e-12);
}

TEST(Ftpipe, AdamAndAdamWMatchO12) {
  // Adam's and AdamW's predictions (docs/schemes.md, "ftpipe"): W = 1, m = 0.1, u = 0.01, t = 1, lr
  // 1e-3, betas (0.9, 0.999), eps 1e-8.
  Optimizer::AdamSettings adam;
  const double expected[] = {0.999788215, 0.999624586, 0.999490619};
  for (int n = 1; n <= 3; ++n) {
    const double w = ftpipe::predict_adam(scalar(1), scalar(0.1), scalar(0.01), at::Tensor(), 1, adam,
                                          std::vector<double>(static_cast<size_t>(n), 1e-3))
                         .item<double>();
    EXPECT_NEAR(w, expected[n - 1], 1e-9) << n;
  }
  adam.weight_decay = 0.1;
  adam.decoupled = true;
  const double adamw[] = {0.999688215, 0.999424618};
  for (int n = 1; n <= 2; ++n) {
    const double w = ftpipe::predict_adam(scalar(1), scalar(0.1), scalar(0.01), at::Tensor(), 1, adam,
                                          std::vector<double>(static_cast<size_t>(n), 1e-3))
                         .item<double>();
    EXPECT_NEAR(w, adamw[n - 1], 1e-9) << n;
  }
}

TEST(Ftpipe, ExpectedStalenessIsF32) {
  EXPECT_EQ(ftpipe::expected_staleness(0, 3), 0);
  EXPECT_EQ(ftpipe::expected_staleness(2, 3), 2);
  EXPECT_EQ(ftpipe::expected_staleness(7, 3), 3);
  EXPECT_EQ(ftpipe::expected_staleness(7, 0), 0);
}

testing::ToyConfig constant_gradient(const std::string& optimizer = "") {
  testing::ToyConfig c;
  c.init = {1, 1, 1, 1};
  c.lr = 0.1;
  c.momentum = 0.9;
  c.examples = 2;
  c.constant_gradient = true;
  c.optimizer = optimizer;
  return c;
}

TEST(Ftpipe, GapAwareMatchesO13AndO14) {
  // Gap-Aware's SGD oracle (docs/schemes.md, "Numbered oracles"): W_2 = 0.768572576 on stage 0 with the stash,
  // and the same from the gradient (apply_from_grad, lr |g| = 0.1 = the Gap here); the last stage
  // never applies it.
  for (const char* scheme :
       {"{type: ftpipe, stash: true, gap_aware: all_except_last}", "{type: ftpipe, gap_aware: all_except_last}"}) {
    const testing::ToyResult r = testing::run_toy(scheme, constant_gradient());
    EXPECT_NEAR(r.weights[0], 0.768572576, 1e-9) << scheme;
    EXPECT_NEAR(r.weights[2], 0.71, 1e-12) << scheme;
  }
  // Gap-Aware's Adam oracle (docs/schemes.md, "Numbered oracles", with the fidelity flag for FTPipe's
  // uncorrected normaliser, docs/schemes.md, "Quirks") and the bias-corrected default (gap_aware_test.cpp).
  const testing::ToyConfig adam = constant_gradient("{type: adam, lr: 0.001}");
  EXPECT_NEAR(
      testing::run_toy("{type: ftpipe, stash: true, gap_aware: all_except_last, gap_aware_raw_normaliser: true}", adam)
          .weights[0],
      0.998307438836, 1e-12);
  EXPECT_NEAR(testing::run_toy("{type: ftpipe, stash: true, gap_aware: all_except_last}", adam).weights[0],
              0.998067819651307, 1e-12);
  // Adam's Gap needs the stash (FTPipe requires it).
  EXPECT_NE(testing::user_error([&] {
              testing::run_toy("{type: ftpipe, gap_aware: all_except_last}", adam);
            }).find("stash: true"),
            std::string::npos);
}

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 96, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 1]}
scheme:    {type: ftpipe}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 3, threads: 1}
)";

TensorDict train(const std::string& scheme, const std::vector<std::string>& more = {}) {
  std::vector<std::string> o{"scheme=" + scheme};
  o.insert(o.end(), more.begin(), more.end());
  return testing::train(kMlp, o);
}

TEST(Ftpipe, OneStageIsSingle) {
  // D = 1: the only stage is the last one: no prediction, no stash, no Gap-Aware.
  const std::vector<std::string> one{"partition.stages=1", "partition.balance=[4]"};
  const TensorDict single = train("{type: single}", one);
  EXPECT_TRUE(testing::identical(single, train("{type: ftpipe}", one)));
  EXPECT_TRUE(testing::identical(
      single, train("{type: ftpipe, predictor: msnag, stash: true, gap_aware: all_except_last}", one)));
  // nesterov_last_partition: Nesterov SGD on it.
  std::vector<std::string> nesterov = one;
  nesterov.push_back("optimizer.nesterov=true");
  EXPECT_TRUE(testing::identical(train("{type: single}", nesterov),
                                 train("{type: ftpipe, predictor: aggmsnag, nesterov_last_partition: true}", one)));
}

TEST(Ftpipe, StashWithoutPredictorIsPipedream) {
  const TensorDict pipedream = train("{type: pipedream}");
  EXPECT_TRUE(testing::identical(pipedream, train("{type: ftpipe, stash: true, recompute: false}")));
  const TensorDict recomputed = train("{type: ftpipe, stash: true}");
  EXPECT_TRUE(testing::identical(pipedream, recomputed)) << testing::max_difference(pipedream, recomputed);
  const TensorDict ga = train("{type: pipedream, gap_aware: all_except_last}");
  EXPECT_TRUE(
      testing::identical(ga, train("{type: ftpipe, stash: true, recompute: false, gap_aware: all_except_last}")));
  const std::string adamw = "optimizer={type: adamw, lr: 0.01, weight_decay: 0.01}";
  EXPECT_TRUE(
      testing::identical(train("{type: pipedream, gap_aware: all_except_last}", {adamw}),
                         train("{type: ftpipe, stash: true, recompute: false, gap_aware: all_except_last}", {adamw})));
  // Without the stash and without recomputation it is `async`.
  EXPECT_TRUE(testing::identical(train("{type: async}"), train("{type: ftpipe, recompute: false}")));
}

TEST(Ftpipe, SchedAwareReadsTheScheduleOnlyWhereItChanges) {
  // Constant LR: the schedule's future LRs are the next one, bit for bit.
  const std::string msnag = "{type: ftpipe, predictor: msnag}";
  const std::string aware = "{type: ftpipe, predictor: msnag, sched_aware: true}";
  EXPECT_TRUE(testing::identical(train(msnag), train(aware)));
  // A per-step decay: the simulated updates further ahead take smaller LRs.
  const std::string decay = "lr_schedule={type: polynomial, power: 2, granularity: step}";
  EXPECT_GT(testing::max_difference(train(msnag, {decay}), train(aware, {decay})), 1e-9);
}

TEST(Ftpipe, MsnagWithoutMomentumPredictsNothing) {
  const std::string plain = "optimizer={type: sgd, lr: 0.05}";
  EXPECT_TRUE(testing::identical(train("{type: ftpipe}", {plain}), train("{type: ftpipe, predictor: msnag}", {plain})));
  EXPECT_TRUE(testing::identical(train("{type: ftpipe, stash: true}", {plain}),
                                 train("{type: ftpipe, predictor: msnag, stash: true}", {plain})));
}

TEST(Ftpipe, AliasedStashIsNoStash) {
  // FTPipe's aliased stash (docs/schemes.md, "Quirks"): with the fidelity flag the backward reads the live
  // weights and every Gap is 0.
  const TensorDict msnag = train("{type: ftpipe, predictor: msnag}");
  EXPECT_TRUE(
      testing::identical(msnag, train("{type: ftpipe, predictor: msnag, stash: true, stash_aliases_live: true}")));
  EXPECT_TRUE(testing::identical(
      msnag,
      train("{type: ftpipe, predictor: msnag, stash: true, stash_aliases_live: true, gap_aware: all_except_last}")));
  // The intended stash (W_hat for the backward) and Gap-Aware each change the run.
  const TensorDict stashed = train("{type: ftpipe, predictor: msnag, stash: true}");
  EXPECT_GT(testing::max_difference(msnag, stashed), 1e-7);
  EXPECT_GT(testing::max_difference(stashed,
                                    train("{type: ftpipe, predictor: msnag, stash: true, gap_aware: all_except_last}")),
            1e-7);
  EXPECT_GT(testing::max_difference(msnag, train("{type: ftpipe}")), 1e-7);
}

TEST(Ftpipe, AdamPredictorsAndTheGradientSideEffect) {
  const std::string adam_l2 = "optimizer={type: adam, lr: 0.01, weight_decay: 0.01}";
  const TensorDict none = train("{type: ftpipe}", {adam_l2});
  const TensorDict msnag = train("{type: ftpipe, predictor: msnag}", {adam_l2});
  const TensorDict agg = train("{type: ftpipe, predictor: aggmsnag}", {adam_l2});
  EXPECT_GT(testing::max_difference(none, msnag), 1e-7);
  // The accumulated gradient is empty at every forward (one update per mini-batch), so
  // aggmsnag predicts as msnag does; the fidelity flag for Adam aggmsnag's write into the
  // gradient (docs/schemes.md, "Quirks") then changes the gradients.
  EXPECT_TRUE(testing::identical(msnag, agg));
  EXPECT_GT(testing::max_difference(
                agg, train("{type: ftpipe, predictor: aggmsnag, prediction_writes_grad: true}", {adam_l2})),
            1e-7);
  // AdamW with everything on runs.
  const std::string adamw = "optimizer={type: adamw, lr: 0.01, weight_decay: 0.01}";
  EXPECT_GT(testing::max_difference(
                train("{type: ftpipe}", {adamw}),
                train("{type: ftpipe, predictor: aggmsnag, stash: true, gap_aware: all_except_last}", {adamw})),
            1e-7);
}

TEST(Ftpipe, NagWithPredictorLooksAheadOnTheLastStage) {
  // One stage descending f(w) = w^2 / 2 (gradient w), lr 0.5, mu 0.9: each forward after the
  // first update reads W_hat = W - lr mu v and its backward the same W_hat (Sutskever's NAG):
  //   step 1: no state yet (docs/schemes.md, "Update directions"): g = 1, v = 1, W = 0.5;
  //   step 2: W_hat = 0.5 - 0.45 = 0.05 = g, v = 0.95, W = 0.025;
  //   step 3: W_hat = 0.025 - 0.4275 = -0.4025 = g, v = 0.4525, W = -0.20125.
  testing::ToyConfig c;
  c.init = {1, 1};
  c.lr = 0.5;
  c.momentum = 0.9;
  c.examples = 3;
  c.quadratic = true;
  const testing::ToyResult r = testing::run_toy("{type: ftpipe, predictor: msnag, nag_with_predictor: true}", c);
  EXPECT_NEAR(r.weights[0], -0.20125, 1e-12);
  EXPECT_NEAR(r.weights[1], -0.20125, 1e-12);
}

TEST(Ftpipe, StalenessAndPenaltyAreRecorded) {
  testing::ToyConfig c = constant_gradient();
  c.init = {1, 1, 1, 1, 1, 1};
  c.examples = 8;
  const testing::ToyResult r =
      testing::run_toy("{type: ftpipe, predictor: msnag, stash: true, gap_aware: all_except_last}", c);
  // Stage 0 (w_0 = 2): predicted forwards stand for the version their update produces, so
  // after the first update their gap is 0 (before it there is nothing to predict from,
  // docs/schemes.md, "Notation and optimizers").
  std::vector<double> forward_gaps, penalties;
  for (const StageMetric& m : r.metrics[0]) {
    if (m.name == "forward_gap") forward_gaps.push_back(m.value);
    if (m.name == "gap_aware_penalty") penalties.push_back(m.value);
  }
  ASSERT_EQ(forward_gaps.size(), 8u);
  EXPECT_EQ(forward_gaps.back(), 0);
  EXPECT_EQ(penalties.size(), 8u);
}

TEST(Ftpipe, RefusesWhatFtpipeRefuses) {
  const std::string decay = "optimizer={type: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.001}";
  EXPECT_NE(testing::user_error([&] { train("{type: ftpipe, predictor: msnag}", {decay}); }).find("aggmsnag"),
            std::string::npos);
  EXPECT_NE(testing::user_error([&] {
              train("{type: ftpipe, predictor: msnag}", {"optimizer={type: nadam, lr: 0.01}"});
            }).find("Fix:"),
            std::string::npos);
  EXPECT_NE(testing::user_error([&] { train("{type: ftpipe, gap_aware_just_loss: true}"); }).find("stash: true"),
            std::string::npos);
  EXPECT_NE(testing::user_error([&] {
              train("{type: ftpipe, predictor: msnag, nesterov_last_partition: true}",
                    {"optimizer={type: sgd, lr: 0.05}"});
            }).find("momentum > 0"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab::ftpipe_test
