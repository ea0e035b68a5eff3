// The synchronous schedules of docs/schedules.md: each equals single-device training on the
// whole mini-batch (float64, as GPipe's test), I then W leaves the gradients of B bit for bit,
// and schedules from files train exactly as the built-in schedules they spell out.
#include <gtest/gtest.h>

#include "core/schedule/lower.h"
#include "core/scheme/scheme.h"
#include "schemes/schedules/modern.h"
#include "tests/support/helpers.h"

namespace pipelab::sync_schedules_test {
namespace {

// 20 steps of batch 16 of an MLP with 4 blocks: 4 stages of one block, 4 micro-batches of 4.
const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 32, 32, 32, 4], dropout: 0.0}
dataset:   {type: synthetic, samples: 320, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 1]}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9, weight_decay: 1.0e-3}
run:       {epochs: 1, batch_size: 16, seed: 3}
)";

const std::string kSchedules = PIPELAB_EXPERIMENTS_DIR "/schedules/";

TEST(SyncSchedules, EachEqualsSingleOnTheWholeMiniBatch) {
  const std::vector<std::string> f64{"run.dtype=float64"};
  const TensorDict single = testing::train(kMlp, f64);
  for (const std::string& scheme : std::vector<std::string>{
           "{type: pipedream_flush, chunks: 4}", "{type: interleaved_1f1b, chunks: 4, virtual_stages: 2}",
        "{type: looped_bfs, chunks: 4, virtual_stages: 2}", "{type: zb_h1, chunks: 4}", "{type: zb_h2, chunks: 4}",
        "{type: zbv, chunks: 4}", "{type: dualpipe_v, chunks: 4}",
        "{type: custom, file: '" + kSchedules + "interleaved_d2_v2_m4.csv'}"}) {
    std::vector<std::string> o = f64;
    o.push_back("scheme=" + scheme);
    const TensorDict trained = testing::train(kMlp, o);
    EXPECT_LT(testing::max_difference(single, trained), 1e-10) << scheme;
  }
}

/// Writes `text` to a schedule file in `dir` and returns the scheme section that reads it.
std::string custom(const testing::TempDir& dir, const std::string& name, const std::string& text) {
  testing::write_text(dir.file(name), text);
  return "scheme={type: custom, file: '" + dir.file(name) + "'}";
}

TEST(SyncSchedules, InputThenWeightGradientsEqualTheWholeBackwardBitwise) {
  // Dropout on: the split must not touch the random streams.
  const std::vector<std::string> base{"model.dropout=0.25", "partition.stages=2", "partition.balance=[2, 2]"};
  testing::TempDir dir;
  auto with = [&](const std::string& scheme) {
    std::vector<std::string> o = base;
    o.push_back(scheme);
    return testing::train(kMlp, o);
  };
  const TensorDict whole = with(custom(dir, "b.sched", "d0: 0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3 0U\n"
                                                       "d1: 1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3 1U\n"));
  // Each B as I then W, and on stage 0 with the W's pushed late (ZB-H1 style).
  const TensorDict split = with(custom(dir, "iw.sched", "d0: 0F0 0F1 0I0 0F2 0I1 0W0 0F3 0I2 0W1 0I3 0W2 0W3 0U\n"
                                                        "d1: 1F0 1I0 1W0 1F1 1I1 1W1 1F2 1I2 1W2 1F3 1I3 1W3 1U\n"));
  EXPECT_TRUE(testing::identical(whole, split)) << "max difference " << testing::max_difference(whole, split);
  // ... and the built-in zero-bubble schedule, whose W's also run in micro-batch order.
  const TensorDict zb = with("scheme={type: zb_h1, chunks: 4}");
  EXPECT_TRUE(testing::identical(whole, zb)) << "max difference " << testing::max_difference(whole, zb);
}

TEST(SyncSchedules, AHandWritten1F1BFileTrainsAsTheBuiltInOne) {
  const std::vector<std::string> two{"model.dropout=0.25", "partition.stages=2", "partition.balance=[2, 2]"};
  std::vector<std::string> built_in = two, from_file = two;
  built_in.push_back("scheme={type: pipedream_flush, chunks: 4}");
  from_file.push_back("scheme={type: custom, file: '" + kSchedules + "1f1b_d2_m4.sched'}");
  const TensorDict a = testing::train(kMlp, built_in), b = testing::train(kMlp, from_file);
  EXPECT_TRUE(testing::identical(a, b)) << "max difference " << testing::max_difference(a, b);
}

TEST(SyncSchedules, TheShippedCsvIsMegatronsInterleavedOrder) {
  const std::string csv = testing::read_text(kSchedules + "interleaved_d2_v2_m4.csv");
  EXPECT_EQ(Schedule::parse_csv(csv), schedules::interleaved_1f1b(2, 2, 4));
}

TEST(SyncSchedules, FileErrorsNameTheFileAndThePlace) {
  testing::TempDir dir;
  const auto error = [&](const std::string& scheme, const std::vector<std::string>& more = {}) {
    std::vector<std::string> o{"partition.stages=2", "partition.balance=[2, 2]", scheme};
    o.insert(o.end(), more.begin(), more.end());
    return testing::user_error([&] { testing::train(kMlp, o); });
  };
  std::string msg = error("scheme={type: custom, file: '" + dir.file("none.sched") + "'}");
  EXPECT_NE(msg.find("scheme.file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot read"), std::string::npos) << msg;
  msg = error(custom(dir, "bad.sched", "d0: 0F0 0B0 0U\nd1: 1F0 1Q0 1U\n"));
  EXPECT_NE(msg.find("bad.sched:2:9: bad action '1Q0'"), std::string::npos) << msg;
  msg = error(custom(dir, "dead.sched", "d0: 0F0 0B0 0F1 0B1 0U\nd1: 1F0 1F1 1B1 1B0 1U\n"));
  EXPECT_NE(msg.find("dead.sched: invalid schedule: deadlock"), std::string::npos) << msg;
  msg = error(custom(dir, "three.sched", "0F0 0B0 0U\n1F0 1B0 1U\n2F0 2B0 2U\n"));
  EXPECT_NE(msg.find("has 3 stages, but partition.stages is 2"), std::string::npos) << msg;
  msg = error(custom(dir, "v.sched", "0F0 0B0 0U\n1F0 1B0 1U\n"), {"scheme.virtual_stages=2"});
  EXPECT_NE(msg.find("not 2 per device"), std::string::npos) << msg;
}

}  // namespace
}  // namespace pipelab::sync_schedules_test
