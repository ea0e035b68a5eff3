// pipedream_flush: golden schedule, bounded memory, and GPipe's numerics.
#include <gtest/gtest.h>

#include "core/schedule/timeline.h"
#include "core/schedule/validate.h"
#include "tests/support/helpers.h"

namespace pipelab::pipedream_flush_test {
namespace {

TEST(PipedreamFlush, GoldenSchedule) {
  const auto scheme = Registry<Scheme>::get().create_default("pipedream_flush");
  const Schedule s = scheme->schedule(3, 4);
  EXPECT_EQ(s, Schedule::parse(testing::read_text(std::string(PIPELAB_TEST_GOLDEN_DIR) + "/pipedream_flush_D3_M4.txt")));
  validate_schedule(s, {scheme->max_in_flight(3)});
  // GPipe's would exceed the bound: all 4 micro-batches are in flight at once.
  const auto gpipe = Registry<Scheme>::get().create_default("gpipe");
  EXPECT_NE(testing::user_error([&] { validate_schedule(gpipe->schedule(3, 4), {scheme->max_in_flight(3)}); }), "");
  // With F = B = 1 the makespan, and so the bubble, is GPipe's: 2 (M + D - 1).
  EXPECT_EQ(simulate_timeline(s, CostModel::uniform(3, 1, 1)).makespan, 12);
}

TEST(PipedreamFlush, SameNumbersAsGpipe) {
  const char* yaml = R"(
model:     {type: mlp, sizes: [12, 32, 32, 4]}
dataset:   {type: synthetic, samples: 160, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 3}
scheme:    {type: gpipe, chunks: 4, checkpoint: never}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
run:       {epochs: 1, batch_size: 16, dtype: float64}
)";
  EXPECT_LT(testing::max_difference(testing::train(yaml), testing::train(yaml, {"scheme={type: pipedream_flush, chunks: 4}"})),
            1e-12);
}

}  // namespace
}  // namespace pipelab::pipedream_flush_test
