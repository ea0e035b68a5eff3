// Weight versions priced (core/schedule/weight_copies.h, Scheme::weight_work): the copies of
// a stage's weights PipeDream's stash, 2BW's double buffer, the predictors and PipeMare's
// correction make, and the predictions, counted by hand from their actions' order, and a
// replay that pays each copy at the stage's copy cost and each prediction at its own.
#include <gtest/gtest.h>

#include "core/config/registry.h"
#include "core/schedule/weight_copies.h"
#include "core/scheme/scheme.h"
#include "tools/simulate/simulate.h"

namespace pipelab::weight_copies_test {
namespace {

std::vector<Action> actions(const std::string& text) {
  // "F0 F1 B0 U": one stage's actions.
  std::vector<Action> out;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    const int mb = word.size() > 1 ? std::stoi(word.substr(1)) : -1;
    out.push_back(word[0] == 'F'   ? Action::F(0, mb)
                  : word[0] == 'B' ? Action::B(0, mb)
                  : word[0] == 'I' ? Action::I(0, mb)
                                   : Action::U(0));
  }
  return out;
}

std::vector<double> copies(const WeightWorks& work) {
  std::vector<double> out;
  for (const WeightWork& w : work) out.push_back(w.copies);
  return out;
}

std::vector<double> predictions(const WeightWorks& work) {
  std::vector<double> out;
  for (const WeightWork& w : work) out.push_back(w.predictions);
  return out;
}

TEST(WeightCopies, PipeDreamsStashSwapsInABackwardsOlderVersion) {
  // F0 and F1 read version 0; B0 still has it live; the update stashes version 1 (1 copy);
  // F2 reads 1; B1 reads 0 (swapped in: 3); the next update stashes 2; B2 reads 1 (3).
  EXPECT_EQ(copies(stash_copies(actions("F0 F1 B0 U F2 B1 U B2"))), (std::vector<double>{0, 0, 0, 1, 0, 3, 1, 3}));
  // A split backward's I is the one that reads the weights.
  EXPECT_EQ(copies(stash_copies(actions("F0 U I0"))), (std::vector<double>{0, 1, 3}));
}

TEST(WeightCopies, TwoBwsDoubleBufferSwapsInTheOlderOnceAnUpdateIsMade) {
  // m = 2: micro-batches 0, 1 are mini-batch 0, 2, 3 mini-batch 1 (reading W_0), 4 mini-batch 2
  // (reading W_1). Before the first update everything reads the live W_0; after it, mini-batch
  // 1's actions read the older buffer; mini-batch 2's F reads the live W_1 until the next update.
  EXPECT_EQ(copies(double_buffer_copies(actions("F0 F1 F2 B0 B1 U F3 B2 B3 F4 U B4"), 2)),
            (std::vector<double>{0, 0, 0, 0, 0, 1, 3, 3, 3, 0, 1, 3}));
}

TEST(WeightCopies, APredictorPredictsAndSwapsInAtEachActionAhead) {
  // One update ahead at each forward: before the first update predict_weights copies the
  // weights (1) and the copy is swapped in (3); after it, a prediction and the swap.
  Predicting p;
  p.forward_steps = 1;
  const WeightWorks work = predicted_swaps(actions("F0 F1 B0 U F2 B1 U B2"), p);
  EXPECT_EQ(copies(work), (std::vector<double>{4, 4, 0, 0, 3, 0, 0, 0}));
  EXPECT_EQ(predictions(work), (std::vector<double>{0, 0, 0, 0, 1, 0, 0, 0}));
  // XPipe predicts nothing before the first update, here at the backwards only.
  p = {};
  p.backward_steps = 2;
  p.from_first_update = true;
  const WeightWorks late = predicted_swaps(actions("F0 B0 U F1 B1"), p);
  EXPECT_EQ(copies(late), (std::vector<double>{0, 0, 0, 0, 3}));
  EXPECT_EQ(predictions(late), (std::vector<double>{0, 0, 0, 0, 1}));
}

TEST(WeightCopies, TheMeterCopiesAtItsOpeningAndMeasuresAtTheUpdateThatReachesItsTarget) {
  // Nothing measured before the first update; F2 opens a measurement (the prediction and the
  // live weights copied: 2) for version 2, and the second update closes it (the weights
  // copied, two distances).
  Predicting p;
  p.forward_steps = 1;
  p.measured = true;
  const WeightWorks work = predicted_swaps(actions("F0 F1 B0 U F2 B1 U B2"), p);
  EXPECT_EQ(copies(work), (std::vector<double>{4, 4, 0, 0, 3 + 2, 0, 1 + 2 * kDistanceCopies, 0}));
}

TEST(WeightCopies, SpecTrainsSecondVersionKeepsTheForwardsPredictionForItsBackward) {
  Predicting p;
  p.forward_steps = 1;
  p.stash_for_backward = true;
  const WeightWorks work = predicted_swaps(actions("F0 F1 B0 U F2 B1 B2"), p);
  EXPECT_EQ(copies(work), (std::vector<double>{4, 4, 3, 0, 3, 3, 3}));
  EXPECT_EQ(predictions(work), (std::vector<double>{0, 0, 0, 0, 1, 0, 0}));
}

std::unique_ptr<Scheme> scheme(const std::string& yaml);

TEST(WeightCopies, SchemesCountTheirPolicysWork) {
  const std::vector<Action> order = actions("F0 F1 B0 U F2 B1 U");
  // SpecTrain's version 1 at stage 0 of 2: forwards predict s_f = 0 + 1 ahead, backwards
  // s_b = 0 (none).
  const WeightWorks spectrain =
      scheme("{type: spectrain, measure_prediction: false}")->weight_work(order, 0, 2);
  EXPECT_EQ(copies(spectrain), (std::vector<double>{4, 4, 0, 0, 3, 0, 0}));
  EXPECT_EQ(predictions(spectrain), (std::vector<double>{0, 0, 0, 0, 1, 0, 0}));
  // The last stage predicts nothing (s_f = 1/2 + 0).
  EXPECT_EQ(copies(scheme("{type: spectrain}")->weight_work(order, 1, 2)), std::vector<double>(7, 0.0));
  // PipeMare's forward correction at stage 0 of 2 (tau = 1): each update copies twice and
  // folds the difference into the velocity; a forward after the first update copies, adds
  // and swaps in.
  const WeightWorks pipemare =
      scheme("{type: pipemare, rescheduling_steps: 10, correction: forward, velocity_decay: 0.5}")
          ->weight_work(order, 0, 2);
  const double update = 2 + kDifferenceCopies + 1 + kAxpyCopies, forward = 1 + kAxpyCopies + kSwapCopies;
  EXPECT_EQ(copies(pipemare), (std::vector<double>{0, 0, 0, update, forward, 0, update}));
  // FTPipe's msnag with a stash at stage 0 of 2 (w_r = 1): before the first update nothing is
  // predicted and each forward stashes a copy; each backward swaps its stash in; F2 predicts
  // d = 1 ahead and swaps the prediction in, which its backward swaps in again.
  const WeightWorks ftpipe = scheme("{type: ftpipe, predictor: msnag, stash: true}")->weight_work(order, 0, 2);
  EXPECT_EQ(copies(ftpipe), (std::vector<double>{1, 1, 3, 0, 3, 3, 0}));
  EXPECT_EQ(predictions(ftpipe), (std::vector<double>{0, 0, 0, 0, 1, 0, 0}));
  // Pipelined Backpropagation at stage 0 of 2 (tick timing: 2 updates late): forward j is
  // min(j, 2) late; `velocity` predicts there (copying before the first update), and
  // `weight_difference` copies at each update and builds W + D (W - W_prev) after the first.
  const WeightWorks velocity =
      scheme("{type: pipelined_backprop, prediction: velocity}")->weight_work(order, 0, 2);
  EXPECT_EQ(copies(velocity), (std::vector<double>{0, 4, 0, 0, 3, 0, 0}));
  EXPECT_EQ(predictions(velocity), (std::vector<double>{0, 0, 0, 0, 1, 0, 0}));
  const double built = 1 + kDifferenceCopies + 1 + kDifferenceCopies + kSwapCopies;
  EXPECT_EQ(copies(scheme("{type: pipelined_backprop, prediction: weight_difference}")->weight_work(order, 0, 2)),
            (std::vector<double>{0, 0, 0, 1, built, 0, 1}));
  // The released asynchronous Nesterov is PipeDream's stash.
  EXPECT_EQ(copies(scheme("{type: nesterov_async}")->weight_work(order, 0, 2)), copies(stash_copies(order)));
}

sim::SimCosts one_stage(double copy_seconds, double prediction_seconds = 0) {
  sim::SimCosts c;
  sim::StageCosts k;
  k.seconds[ActionKind::Forward] = 1;
  k.seconds[ActionKind::Backward] = 2;
  k.seconds[ActionKind::Update] = 0.5;
  k.weight_copy_seconds = copy_seconds;
  k.prediction_seconds = prediction_seconds;
  c.stages.push_back(k);
  return c;
}

std::unique_ptr<Scheme> scheme(const std::string& yaml) {
  return Registry<Scheme>::get().create(ConfigNode(YAML::Load(yaml), std::make_shared<ConfigSource>("t"), "scheme"));
}

TEST(WeightCopies, TheReplayPaysEachCopyAtTheStagesCopyCost) {
  // One stage of 2BW with m = 2 over 4 units: F0 B0 F1 B1 U F2 B2 F3 B3 U. Mini-batch 1's four
  // actions each swap the older buffer in (3 copies) and each update copies the live weights
  // into it (1): 14 copies on the one device's path.
  const auto two_bw = scheme("{type: pipedream_2bw, micro_batches: 2, flush: epoch}");
  const double without = sim::simulate(*two_bw, 1, 4, 1, one_stage(0), {}).makespan;
  const double with = sim::simulate(*two_bw, 1, 4, 1, one_stage(0.01), {}).makespan;
  EXPECT_NEAR(with - without, 14 * 0.01, 1e-12);
  // GPipe reads its live weights in place: nothing to pay.
  const auto gpipe = scheme("{type: gpipe, chunks: 4}");
  EXPECT_DOUBLE_EQ(sim::simulate(*gpipe, 1, 4, 1, one_stage(0.01), {}).makespan,
                   sim::simulate(*gpipe, 1, 4, 1, one_stage(0), {}).makespan);
}

TEST(WeightCopies, TheReplayPaysEachPredictionAtTheStagesPredictionCost) {
  // PipeOptim's released variant predicts D - r = 1 ahead even on one stage: F0 B0 U F1 B1 U
  // F2 B2 U F3 B3 U. F0 copies the weights (no state yet: 1) and swaps them in (3); F1-F3
  // each predict and swap in (3): 13 copies and 3 predictions.
  const auto pipeoptim = scheme("{type: pipeoptim, variant: reference, measure_prediction: false}");
  const double without = sim::simulate(*pipeoptim, 1, 4, 1, one_stage(0), {}).makespan;
  const double with = sim::simulate(*pipeoptim, 1, 4, 1, one_stage(0.01, 0.1), {}).makespan;
  EXPECT_NEAR(with - without, 13 * 0.01 + 3 * 0.1, 1e-12);
  // With its meter: F1, F2 and F3 each open a measurement (2 copies) that the next update
  // closes (1 + 2 distances); U1 closes none. The updates' work is paid once each, in all:
  // 13 + 3 x 2 + 3 x 29 copies.
  const auto measured = scheme("{type: pipeoptim, variant: reference}");
  const double plain = sim::simulate(*measured, 1, 4, 1, one_stage(0), {}).makespan;
  const double metered = sim::simulate(*measured, 1, 4, 1, one_stage(0.01, 0.1), {}).makespan;
  EXPECT_NEAR(metered - plain, (13 + 3 * 2 + 3 * (1 + 2 * kDistanceCopies)) * 0.01 + 3 * 0.1, 1e-12);
}

}  // namespace
}  // namespace pipelab::weight_copies_test
