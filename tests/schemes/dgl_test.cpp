// Decoupled greedy learning (docs/schemes.md, "dgl"): synchronous — its oracle in "Numbered oracles",
// its identity with interlocking's local mode, what it sends — and asynchronous with replay
// buffers: the oracle's asynchronous rows, the pick sequence, the buffer's ranking (and the
// reference code's, docs/schemes.md, "Quirks").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/schedule/validate.h"
#include "schemes/dgl_replay.h"
#include "tests/schemes/toy_pipeline.h"
#include "tests/support/helpers.h"

namespace pipelab::dgl_test {
namespace {

testing::ToyConfig o22() {
  testing::ToyConfig c;
  c.init = {1, 0.5, 2, -0.8};  // (a0, c0), (a1, c1)
  c.greedy_heads = true;
  return c;
}

TEST(Dgl, SynchronousOracleO22) {
  // Two scalar modules h_k = a_k h_{k-1} with auxiliary z = c_k h_k and loss (z - t)^2 / 2,
  // SGD 0.1, the four samples of docs/schemes.md, "Toy pipeline". Module 1 reads h computed with module 0's pre-step
  // a0.
  const std::vector<double> want{0.803704956, 0.132065394, 1.787263276, -0.105750879};
  for (const char* scheme : {"{type: dgl}", "{type: interlocking, mode: local}"}) {
    const testing::ToyResult r = testing::run_toy(scheme, o22());
    ASSERT_EQ(r.weights.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.weights[i], want[i], 1e-9) << scheme << " weight " << i;
  }
}

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 160, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 2]}
scheme:    {type: dgl}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 2}
)";

TEST(Dgl, SynchronousIsInterlockingLocalMode) {
  // The same heads (fc8_fc), the same initial weights: identical parameters after two epochs,
  // heads included, and different from end-to-end training.
  for (const char* dtype : {"float32", "float64"}) {
    const std::vector<std::string> base{std::string("run.dtype=") + dtype};
    const auto with = [&](const std::string& scheme) {
      std::vector<std::string> o = base;
      o.push_back("scheme=" + scheme);
      return testing::train(kMlp, o);
    };
    const TensorDict dgl = with("{type: dgl, heads: fc8_fc}");
    EXPECT_TRUE(testing::identical(dgl, with("{type: interlocking, mode: local, heads: fc8_fc}"))) << dtype;
    EXPECT_GT(testing::max_difference(dgl, with("{type: interlocking, mode: global}")), 1e-3) << dtype;
  }
}

TEST(Dgl, NothingGoesBackAndHeadsAreChecked) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kMlp, dir.file("run"), {"run.epochs=1"});
  Runner runner(e, {false, true});
  const RunSummary s = runner.run();
  EXPECT_EQ(s.history.back().bytes_forward_per_step, 3 * 16 * 24 * 4);
  EXPECT_EQ(s.history.back().bytes_backward_per_step, 0.0);
  const std::string bad = testing::user_error([] { testing::experiment(kMlp, "", {"scheme={type: dgl, heads: fc8_relu}"}); });
  EXPECT_NE(bad.find("scheme.heads"), std::string::npos) << bad;
  EXPECT_NE(bad.find("'relu' in 'fc8_relu' is not a known token"), std::string::npos) << bad;
}

TEST(Dgl, AsynchronousOracleO22) {
  // One entry per boundary and the picks 0 1 0 1 ...: each output is read once, by the next
  // pick of module 1, which is the synchronous loop.
  const std::vector<double> sync{0.803704956, 0.132065394, 1.787263276, -0.105750879};
  const testing::ToyResult one = testing::run_toy("{type: dgl, buffer: 1, order: list, picks: [0, 1]}", o22());
  for (size_t i = 0; i < sync.size(); ++i) EXPECT_NEAR(one.weights[i], sync[i], 1e-9) << "weight " << i;
  // Two entries and the picks 0 0 1 1 0 1 1 1 over three mini-batches: module 1 reads the
  // outputs h = 2, 1, -0.8, -0.8, 2 (least read first, then the freshest).
  testing::ToyConfig c = o22();
  c.examples = 3;
  const char* scheme = "{type: dgl, buffer: 2, order: list, picks: [0, 0, 1, 1, 0, 1, 1, 1]}";
  const testing::ToyResult two = testing::run_toy(scheme, c);
  const std::vector<double> want{0.7992, 0.0936, 1.622181951, -0.337698686};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(two.weights[i], want[i], 1e-9) << "weight " << i;
  EXPECT_EQ(two.losses.size(), 5u);  // one per forward of the loss stage
}

TEST(Dgl, ReplayScheduleReadsWhatTheBufferGives) {
  dgl::ReplayRule rule;
  rule.buffer = 2;
  const Schedule s = dgl::replay_schedule(rule, 2, {0, 0, 1, 1, 0, 1, 1, 1});
  ASSERT_TRUE(s.replays());
  // Stage 0's outputs 0, 1, 2 are h = 1, 2, -0.8 in the oracle of docs/schemes.md, "Numbered oracles".
  std::vector<int> reads;
  for (int mb = 0; mb < 5; ++mb) reads.push_back(s.reads(1, mb));
  EXPECT_EQ(reads, (std::vector<int>{1, 0, 2, 2, 1}));
  EXPECT_EQ(s.readers(1, 0), 1);
  EXPECT_EQ(s.readers(1, 1), 2);
  EXPECT_EQ(s.readers(1, 2), 2);
  EXPECT_EQ(s.feed_unit(1, 3), 2);
  EXPECT_EQ(s.device(0).size(), 3u * 4u);  // F, SEND_F, B, U per pick
  ValidateOptions rules;
  rules.max_in_flight = {1, 1};
  rules.training = true;
  rules.coverage = Coverage::EveryStage;  // the data enters at stage 0, once each
  EXPECT_NO_THROW(validate_schedule(s, rules));
  EXPECT_NE(s.to_text().find("# stage 1 forwards read the outputs of stage 0: F0<-1 F1<-0 F2<-2 F3<-2 F4<-1"),
            std::string::npos)
      << s.to_text();
  EXPECT_NE(testing::user_error([&] { (void)s.to_csv(); }).find("torch's CSV cannot say"), std::string::npos);
  // A module with nothing left to read skips its pick.
  rule.max_reuse = 1;
  const Schedule capped = dgl::replay_schedule(rule, 2, {0, 1, 1, 1});
  EXPECT_EQ(capped.device(1).size(), 1u + 3u);  // RECV_F0, then one pick of F, B, U
}

TEST(Dgl, TheBufferRanksLeastReadThenFreshestAndTheReferenceQuirk) {
  // The reference code's ranking quirk (docs/schemes.md, "dgl", docs/schemes.md, "Quirks"), its example: three slots,
  // write pointer 1, nothing read. The freshest is slot 0 (the fourth output); the reference code ranks
  // slot 1, the oldest, freshest.
  const auto fill = [](dgl::Ranking r) {
    dgl::RingBuffer b(3, r, 0);
    for (int mb = 0; mb < 4; ++mb) b.push(mb);  // slots: 3, 1, 2; pointer at 1
    return b;
  };
  dgl::RingBuffer lifo = fill(dgl::Ranking::Lifo), quirk = fill(dgl::Ranking::Reference);
  EXPECT_EQ(lifo.take(), 3);
  EXPECT_EQ(quirk.take(), 1);
  EXPECT_EQ(lifo.take(), 2);  // 3 was read once: the freshest unread
  EXPECT_EQ(lifo.take(), 1);
  EXPECT_EQ(lifo.take(), 3);  // all read once: the freshest again
  dgl::RingBuffer once(2, dgl::Ranking::Lifo, 1);
  EXPECT_EQ(once.take(), -1);  // empty
  once.push(7);
  EXPECT_EQ(once.take(), 7);
  EXPECT_EQ(once.take(), -1);  // read max_reuse times
}

TEST(Dgl, PickSequences) {
  dgl::ReplayRule rule;
  rule.order = dgl::Order::RoundRobin;
  // The fill 0 0 1 1 2 2, then round robin until module 0's fifth pick would come.
  EXPECT_EQ(dgl::pick_sequence(rule, 3, 4), (std::vector<int>{0, 0, 1, 1, 2, 2, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(dgl::pick_sequence(rule, 3, 1), (std::vector<int>{0}));
  rule.order = dgl::Order::Uniform;
  rule.seed = 5;
  const std::vector<int> a = dgl::pick_sequence(rule, 2, 2000);
  EXPECT_EQ(a, dgl::pick_sequence(rule, 2, 2000));
  EXPECT_EQ(std::count(a.begin(), a.end(), 0), 2000);
  const double even = static_cast<double>(std::count(a.begin(), a.end(), 1)) / 2000;
  EXPECT_NEAR(even, 1.0, 0.1);
  rule.seed = 6;
  EXPECT_NE(a, dgl::pick_sequence(rule, 2, 2000));
  // The slowed module is picked (1 - slowdown) times as often.
  rule.slow_stage = 1;
  rule.slowdown = 0.5;
  const std::vector<int> slow = dgl::pick_sequence(rule, 2, 2000);
  EXPECT_NEAR(static_cast<double>(std::count(slow.begin(), slow.end(), 1)) / 2000, 0.5, 0.06);
  rule.order = dgl::Order::List;
  rule.picks = {1, 1};
  EXPECT_NE(testing::user_error([&] { dgl::pick_sequence(rule, 2, 4); }).find("never names module 0"),
            std::string::npos);
  rule.picks = {0, 2};
  EXPECT_NE(testing::user_error([&] { dgl::pick_sequence(rule, 2, 4); }).find("names module 2"), std::string::npos);
}

TEST(Dgl, AsynchronousTrainsAndItsOptionsAreChecked) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kMlp, dir.file("run"), {"run.epochs=1", "scheme={type: dgl, buffer: 3, seed: 1}"});
  Runner runner(e, {false, true});
  const RunSummary s = runner.run();
  EXPECT_TRUE(std::isfinite(s.history.back().train_loss));
  EXPECT_EQ(s.history.back().bytes_backward_per_step, 0.0);
  const TensorDict async = testing::train(kMlp, {"scheme={type: dgl, buffer: 3, seed: 1, heads: fc8_fc}"});
  EXPECT_GT(testing::max_difference(async, testing::train(kMlp, {"scheme={type: dgl, heads: fc8_fc}"})), 1e-3);
  const auto refused = [](const std::string& scheme) {
    return testing::user_error([&] { testing::experiment(kMlp, "", {"scheme=" + scheme}); });
  };
  EXPECT_NE(refused("{type: dgl, order: round_robin}").find("buffer 0 is synchronous"), std::string::npos);
  EXPECT_NE(refused("{type: dgl, buffer: 2, picks: [0, 1]}").find("and order: list"), std::string::npos);
  EXPECT_NE(refused("{type: dgl, buffer: 2, order: list}").find("needs the modules to pick"), std::string::npos);
  EXPECT_NE(refused("{type: dgl, buffer: 2, slowdown: 1}").find("scheme.slowdown"), std::string::npos);
}

}  // namespace
}  // namespace pipelab::dgl_test
