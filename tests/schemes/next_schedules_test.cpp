// The next schedules (reference-schemes §9.2): torch's ScheduleInterleavedZeroBubble as
// `zb_h1` with virtual_stages — the golden order O18 (checked there against torch 2.15), its
// rounds rule for flexible micro-batch counts (PR 129597; Q60's refusal), well-formed orders
// over (p, v, n), each device running n·v of each pass, and the numbers of `single` on the whole
// mini-batch (a synchronous schedule, F7).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/schedule/validate.h"
#include "schemes/schedules/modern.h"
#include "tests/support/helpers.h"

namespace pipelab {
namespace {

/// Device d's actions, written as O18 writes them (stage, kind, micro-batch), U left out.
std::string order(const Schedule& s, int d) {
  std::string out;
  for (const Action& a : s.device(d)) {
    if (a.kind == ActionKind::Update) continue;
    out += (out.empty() ? "" : " ") + a.str();
  }
  return out;
}

TEST(InterleavedZeroBubble, TheGoldenOrderOfTorch) {
  // O18: P = 2, L = 2, n = 4 (R = 2 rounds of 2); torch's idle slots carry no meaning (Q59).
  const Schedule s = schedules::interleaved_zero_bubble(2, 2, 4);
  EXPECT_EQ(order(s, 0),
            "0F0 0F1 2F0 2F1 2I0 2W0 0F2 2I1 2W1 0F3 0I0 0W0 2F2 0I1 0W1 2F3 2I2 2W2 2I3 2W3 0I2 0W2 0I3 0W3");
  EXPECT_EQ(order(s, 1),
            "1F0 1F1 3F0 3I0 3F1 3I1 3W0 1F2 1I0 3W1 1F3 1I1 1W0 3F2 3I2 1W1 3F3 3I3 3W2 1I2 3W3 1I3 1W2 1W3");
  EXPECT_EQ(s.placement(), (std::vector<int>{0, 1, 0, 1}));
}

TEST(InterleavedZeroBubble, WellFormedForFlexibleMicroBatchCounts) {
  for (int p = 1; p <= 4; ++p) {
    for (int v = 2; v <= 3; ++v) {
      for (int n = 1; n <= 3 * p + 2; ++n) {
        const int rounds = std::max(1, n / p);
        if (n % rounds != 0) {
          // Q60: torch refuses it (P = 4: n = 10 and 3 are accepted, 9 is refused).
          EXPECT_NE(testing::user_error([&] { schedules::interleaved_zero_bubble(p, v, n); }).find("Fix:"),
                    std::string::npos);
          continue;
        }
        const Schedule s = schedules::interleaved_zero_bubble(p, v, n);
        SCOPED_TRACE(s.to_text());
        EXPECT_NO_THROW(validate_schedule(s));
        for (int d = 0; d < p; ++d) {
          for (ActionKind k : {ActionKind::Forward, ActionKind::BackwardInput, ActionKind::BackwardWeight}) {
            EXPECT_EQ(std::count_if(s.device(d).begin(), s.device(d).end(), [&](const Action& a) { return a.kind == k; }),
                      n * v);
          }
        }
      }
    }
  }
  EXPECT_NO_THROW(schedules::interleaved_zero_bubble(4, 2, 10));
  EXPECT_NO_THROW(schedules::interleaved_zero_bubble(4, 2, 3));
  EXPECT_NE(testing::user_error([] { schedules::interleaved_zero_bubble(4, 2, 9); }).find("2 rounds"),
            std::string::npos);
}

const char* kDeep = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 48, test_samples: 8, shape: [12], classes: 4}
partition: {stages: 8}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 12, seed: 5, threads: 1, dtype: float64}
)";

TEST(InterleavedZeroBubble, EqualsSingleOnTheWholeMiniBatch) {
  const TensorDict single = testing::train(kDeep);
  for (const std::string& scheme : {std::string("{type: zb_h1, chunks: 6, virtual_stages: 2}"),
                                    std::string("{type: zb_h1, chunks: 3, virtual_stages: 2}")}) {
    for (const std::string& executor : {std::string("sequential"), std::string("threaded")}) {
      const TensorDict zb = testing::train(kDeep, {"scheme=" + scheme, "run.executor=" + executor});
      EXPECT_LT(testing::max_difference(single, zb), 1e-10) << scheme << " " << executor;
    }
  }
}

}  // namespace
}  // namespace pipelab
