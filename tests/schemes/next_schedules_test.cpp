// The next schedules (docs/schedules.md): torch's ScheduleInterleavedZeroBubble as
// `zb_h1` with virtual_stages — the golden order of docs/schemes.md, "Numbered oracles" (checked there against
// torch 2.15), its rounds rule for flexible micro-batch counts (PR 129597; torch's refusal,
// docs/schemes.md, "Quirks"), well-formed orders over (p, v, n), each device running n·v of each
// pass — and V-Half and V-Min: the golden orders of docs/schemes.md, "Numbered oracles", the peak memory and spans of
// docs/schedules.md "Built-in schedules", well-formed orders. All of them give the numbers of
// `single` on the whole mini-batch (synchronous schedules, docs/schemes.md, "single").
#include <gtest/gtest.h>

#include <algorithm>

#include "core/schedule/timeline.h"
#include "core/schedule/validate.h"
#include "schemes/schedules/modern.h"
#include "tests/support/helpers.h"

namespace pipelab::next_schedules_test {
namespace {

/// Device d's actions, written as the golden order of docs/schemes.md, "Numbered oracles" writes them (stage,
/// kind, micro-batch), U left out.
std::string order(const Schedule& s, int d) {
  std::string out;
  for (const Action& a : s.device(d)) {
    if (a.kind == ActionKind::Update) continue;
    out += (out.empty() ? "" : " ") + a.str();
  }
  return out;
}

TEST(InterleavedZeroBubble, TheGoldenOrderOfTorch) {
  // The golden order (docs/schemes.md, "Numbered oracles"): P = 2, L = 2, n = 4 (R = 2 rounds of 2); torch's
  // idle slots carry no meaning (docs/schemes.md, "Quirks").
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
          // torch refuses it (docs/schemes.md, "Quirks"; P = 4: n = 10 and 3 are accepted, 9 is refused).
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

/// The notation of docs/schemes.md, "Numbered oracles"'s V-Half and V-Min oracle for a V device's order:
/// F0a = forward of micro-batch 0 on chunk a (stage d),
/// B = the input gradient (pipelab's I).
std::string v_order(const Schedule& s, int d) {
  const int p = s.devices();
  std::string out;
  for (const Action& a : s.device(d)) {
    if (a.kind == ActionKind::Update) continue;
    const char kind = a.kind == ActionKind::Forward ? 'F' : a.kind == ActionKind::BackwardInput ? 'B' : 'W';
    out += fmt::format("{}{}{}{}", out.empty() ? "" : " ", kind, a.mb, a.stage == d ? 'a' : 'b');
    EXPECT_TRUE(a.stage == d || a.stage == 2 * p - 1 - d) << a.str();
  }
  return out;
}

TEST(VShapes, TheGoldenOrdersOfTheReferenceGenerator) {
  // The V-Half and V-Min oracle of docs/schemes.md, "Numbered oracles", p = 4, m = 4 (checked there against
  // zbv_greedy.py).
  const Schedule half = schedules::v_half(4, 4);
  EXPECT_EQ(v_order(half, 0), "F0a F1a F2a F3a F0b B0b W0b F1b B1b W1b F2b B0a B2b W2b F3b W0a B1a B3b W3b W1a B2a W2a B3a W3a");
  EXPECT_EQ(v_order(half, 1), "F0a F1a F2a F3a F0b F1b B0b W0b F2b B1b W1b B0a W0a F3b B2b W2b B1a W1a B3b W3b B2a W2a B3a W3a");
  EXPECT_EQ(v_order(half, 2), "F0a F1a F2a F0b F1b F2b B0b W0b F3a B1b B0a W1b W0a F3b B1a B2b W2b W1a B2a B3b W3b W2a B3a W3a");
  EXPECT_EQ(v_order(half, 3), "F0a F0b F1a F1b F2a F2b B0b W0b B0a W0a F3a F3b B1b W1b B1a W1a B2b W2b B2a W2a B3b W3b B3a W3a");
  const Schedule min = schedules::v_min(4, 4);
  EXPECT_EQ(v_order(min, 0), "F0a F1a F2a F0b B0b W0b F1b B1b W1b B0a W0a F3a F2b B2b B1a W2b W1a F3b B3b B2a W3b W2a B3a W3a");
  EXPECT_EQ(v_order(min, 1), "F0a F1a F0b F1b B0b W0b F2a B0a B1b W1b W0a F2b F3a B1a B2b W2b W1a F3b B2a B3b W3b W2a B3a W3a");
  EXPECT_EQ(v_order(min, 2), "F0a F1a F0b F1b B0b W0b F2a B0a W0a B1b F2b W1b B1a F3a W1a B2b F3b W2b B2a W2a B3b W3b B3a W3a");
  EXPECT_EQ(v_order(min, 3), "F0a F0b F1a F1b B0b B0a W0b W0a F2a F2b B1b B1a W1b W1a F3a F3b B2b B2a W2b W2a B3b B3a W3b W3a");
}

TEST(VShapes, MemoryAndBubbleAsPublished) {
  // docs/schedules.md "Built-in schedules": peak activations (p+2)//2 (V-Half) and (p+4)//3 (V-Min)
  // full-stage micro-batches, a chunk being half a stage; the timeline counts chunk-micro-batches.
  for (int p = 2; p <= 8; ++p) {
    const int m = 2 * p;
    for (const bool half : {true, false}) {
      const Schedule s = half ? schedules::v_half(p, m) : schedules::v_min(p, m);
      const Timeline t = simulate_timeline(s, CostModel::split(s.stages(), 1, 1, 1));
      const int peak = *std::max_element(t.peak_in_flight.begin(), t.peak_in_flight.end());
      EXPECT_EQ(peak, 2 * (half ? (p + 2) / 2 : (p + 4) / 3)) << (half ? "v_half" : "v_min") << " p=" << p;
    }
  }
  // The spans of docs/schedules.md "Built-in schedules" (F = B = W = 1000, a message 1), derived
  // there from the reference generator.
  const auto span = [](const Schedule& s) {
    CostModel c = CostModel::split(s.stages(), 1000, 1000, 1000);
    c.transfer = 1;
    return simulate_timeline(s, c).makespan;
  };
  EXPECT_EQ(span(schedules::v_half(4, 8)), 53022);
  EXPECT_EQ(span(schedules::v_min(4, 8)), 59040);
  EXPECT_EQ(span(schedules::v_half(8, 16)), 113048);
  EXPECT_EQ(span(schedules::v_min(8, 16)), 123106);
  EXPECT_EQ(span(schedules::v_half(8, 32)), 209048);
  EXPECT_EQ(span(schedules::v_min(8, 32)), 219188);
}

TEST(VShapes, WellFormed) {
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 3 * p; ++m) {
      for (const Schedule& s : {schedules::v_half(p, m), schedules::v_min(p, m)}) {
        SCOPED_TRACE(s.to_text());
        EXPECT_NO_THROW(validate_schedule(s));
        EXPECT_EQ(s.placement(), schedules::v_placement(p));
        for (int d = 0; d < p; ++d) {
          for (ActionKind k : {ActionKind::Forward, ActionKind::BackwardInput, ActionKind::BackwardWeight}) {
            EXPECT_EQ(std::count_if(s.device(d).begin(), s.device(d).end(), [&](const Action& a) { return a.kind == k; }),
                      2 * m);
          }
        }
      }
    }
  }
}

/// The notation of Chimera's oracle (docs/schemes.md, "Numbered oracles") for a Chimera worker: F0d = forward of
/// the down pipeline's micro-batch 0, B1u = backward of the up pipeline's micro-batch 1
/// (per-pipeline indices).
std::string chimera_order(const Schedule& s, int d) {
  const int stages = s.stages() / 2, per_pipeline = s.micro_batches() / 2;
  std::string out;
  for (const Action& a : s.device(d)) {
    if (a.kind != ActionKind::Forward && a.kind != ActionKind::Backward) continue;
    const bool up = a.stage >= stages;
    out += fmt::format("{}{}{}{}", out.empty() ? "" : " ", a.kind == ActionKind::Forward ? 'F' : 'B',
                       a.mb - (up ? per_pipeline : 0), up ? 'u' : 'd');
  }
  return out;
}

TEST(Chimera, TheGoldenOrdersOfTheReferenceCode) {
  // Chimera's oracle (docs/schemes.md, "Numbered oracles"; the orders of docs/schemes.md, "chimera" at D = 4, m = D: 2
  // micro-batches per pipeline).
  const Schedule s = schedules::chimera(4, 2, false);
  EXPECT_EQ(chimera_order(s, 0), "F0d F1d F0u B0u F1u B1u B0d B1d");
  EXPECT_EQ(chimera_order(s, 1), "F0d F0u F1d F1u B0u B0d B1u B1d");
  EXPECT_EQ(chimera_order(s, 2), "F0u F0d F1u F1d B0d B0u B1d B1u");
  EXPECT_EQ(chimera_order(s, 3), "F0u F1u F0d B0d F1d B1d B0u B1u");
  EXPECT_EQ(chimera_order(schedules::chimera(6, 3, false), 1), "F0d F1d F0u F2d F1u B0u F2u B1u B0d B2u B1d B2d");
  // The oracle's m = 2D orders on worker 0 (docs/schemes.md, "Numbered oracles"): direct concatenation and
  // forward doubling (docs/schemes.md, "chimera").
  EXPECT_EQ(chimera_order(schedules::chimera(4, 4, false), 0), "F0d F1d F0u B0u F1u B1u B0d F2d B1d F3d F2u B2u F3u B3u B2d B3d");
  EXPECT_EQ(chimera_order(schedules::chimera(4, 4, true), 0), "F0d F1d F2d F3d F0u F1u B0u F2u F3u B1u B0d B2u B1d B3u B2d B3d");
  EXPECT_EQ(s.placement(), (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(schedules::chimera_placement(4), s.placement());
  // Each stage steps right after its last backward (eager synchronisation).
  EXPECT_EQ(s.device(0).back(), Action::U(0));
  EXPECT_NE(testing::user_error([] { schedules::chimera(3, 3, false); }).find("even"), std::string::npos);
  EXPECT_NE(testing::user_error([] { schedules::chimera(4, 3, false); }).find("multiple of 4"), std::string::npos);
  EXPECT_NE(testing::user_error([] { schedules::chimera(4, 2, true); }).find("forward doubling"), std::string::npos);
}

TEST(Chimera, BubbleAndMemoryAsDerived) {
  // The derived figures of docs/schemes.md, "chimera" (unit-cost replay; makespan and idle time per worker) and the
  // peak activations h + 1 + min(p, D-1-p), in stage-micro-batches.
  const auto replay = [](int D, int n, bool doubling, double backward) {
    const Schedule s = schedules::chimera(D, n, doubling);
    return simulate_timeline(s, CostModel::uniform(s.stages(), 1, backward));
  };
  struct Row { int D, n; bool doubling; double backward, makespan, idle; };
  for (const Row& r : std::vector<Row>{{4, 2, false, 1, 10, 2}, {4, 4, false, 1, 18, 2}, {4, 4, true, 1, 18, 2},
                                       {4, 8, false, 1, 34, 2}, {4, 8, true, 1, 34, 2}, {4, 2, false, 2, 16, 4},
                                       {4, 4, false, 2, 30, 6}, {4, 4, true, 2, 27, 3}, {4, 8, false, 2, 58, 10},
                                       {4, 8, true, 2, 51, 3}, {8, 4, false, 1, 22, 6}, {8, 8, false, 2, 66, 18},
                                       {8, 8, true, 2, 57, 9}, {8, 16, true, 2, 105, 9}}) {
    const Timeline t = replay(r.D, r.n, r.doubling, r.backward);
    SCOPED_TRACE(::testing::Message() << "D=" << r.D << " n=" << r.n << " doubling=" << r.doubling);
    EXPECT_DOUBLE_EQ(t.makespan, r.makespan);
    for (int d = 0; d < r.D; ++d) EXPECT_DOUBLE_EQ(t.makespan - t.busy[static_cast<size_t>(d)], r.idle) << d;
  }
  EXPECT_EQ(replay(4, 2, false, 1).peak_in_flight, (std::vector<int>{3, 4, 4, 3}));
  EXPECT_EQ(replay(8, 4, false, 1).peak_in_flight, (std::vector<int>{5, 6, 7, 8, 8, 7, 6, 5}));
  EXPECT_EQ(replay(4, 4, false, 1).peak_in_flight, (std::vector<int>{3, 4, 4, 3}));  // concatenation: as m = D
  EXPECT_EQ(replay(4, 4, true, 1).peak_in_flight, (std::vector<int>{7, 8, 8, 7}));   // doubling: + D
  for (int D : {2, 4, 6, 8}) {
    for (int k : {1, 2, 4}) {
      EXPECT_NO_THROW(validate_schedule(schedules::chimera(D, k * D / 2, false))) << D << " " << k;
      if (k % 2 == 0) EXPECT_NO_THROW(validate_schedule(schedules::chimera(D, k * D / 2, true))) << D << " " << k;
    }
  }
}

const char* kDeep = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 48, test_samples: 8, shape: [12], classes: 4}
partition: {stages: 8}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 12, seed: 5, threads: 1, dtype: float64}
)";

TEST(Chimera, TheReferenceCodesGradientScaleIsALargerStep) {
  // Equivalence 3 (the reference code's gradient scale, docs/schemes.md, "chimera" and docs/schemes.md, "Quirks"):
  // (m/2) x the mean gradient = the mean with lr x m/2, for plain SGD.
  const std::vector<std::string> plain{"optimizer={type: sgd, lr: 0.05}", "run.epochs=1", "run.batch_size=16"};
  std::vector<std::string> reference = plain, scaled = plain;
  reference.push_back("scheme={type: chimera, chunks: 8, gradient_scale: reference}");
  scaled[0] = "optimizer={type: sgd, lr: 0.2}";
  scaled.push_back("scheme={type: chimera, chunks: 8}");
  EXPECT_LT(testing::max_difference(testing::train(kDeep, reference), testing::train(kDeep, scaled)), 1e-10);
  EXPECT_NE(testing::user_error([] { testing::train(kDeep, {"scheme={type: chimera, mode: backward_halving}"}); })
                .find("UNVERIFIED"),
            std::string::npos);
}

TEST(Chimera, TheReferenceRuntimesReplicaInitDrawsTheUpPipelineApart) {
  // The fidelity flag for Chimera's unbroadcast replicas (docs/schemes.md, "Quirks"): the up pipeline's
  // copies start from other draws, so the all-reduced gradient mixes two models and the run leaves
  // the default's path (which equals `single`: NextSchedules.EqualSingleOnTheWholeMiniBatch). The
  // dropout masks are the same in both.
  const std::vector<std::string> base{"optimizer={type: sgd, lr: 0.05}", "run.epochs=1", "run.batch_size=16"};
  std::vector<std::string> same = base, built = base;
  same.push_back("scheme={type: chimera, chunks: 8}");
  built.push_back("scheme={type: chimera, chunks: 8, replica_init: as_built}");
  EXPECT_GT(testing::max_difference(testing::train(kDeep, built), testing::train(kDeep, same)), 1e-4);
}

TEST(NextSchedules, EqualSingleOnTheWholeMiniBatch) {
  // Chimera splits a mini-batch of 16 into two shares of 8: 4 (or, doubled, 8) micro-batches
  // per pipeline, a multiple of D/2 = 4. Its second pipeline is a replica, whose stages draw
  // their own dropout masks (as data-parallel replicas do): no dropout there.
  for (const std::string& batch : {std::string("12"), std::string("16")}) {
    const std::string dropout = batch == "12" ? "model.dropout=0.1" : "model.dropout=0";
    const TensorDict single = testing::train(kDeep, {"run.batch_size=" + batch, dropout});
    const std::vector<std::string> schemes =
        batch == "12" ? std::vector<std::string>{"{type: zb_h1, chunks: 6, virtual_stages: 2}",
                                                 "{type: zb_h1, chunks: 3, virtual_stages: 2}",
                                                 "{type: v_half, chunks: 6}", "{type: v_min, chunks: 4}"}
                      : std::vector<std::string>{"{type: chimera, chunks: 8}",
                                                 "{type: chimera, chunks: 16, mode: doubling}"};
    for (const std::string& scheme : schemes) {
      for (const std::string& executor : {std::string("sequential"), std::string("threaded")}) {
        const TensorDict run = testing::train(kDeep, {"scheme=" + scheme, "run.executor=" + executor,
                                                      "run.batch_size=" + batch, dropout});
        EXPECT_LT(testing::max_difference(single, run), 1e-10) << scheme << " " << executor;
      }
    }
  }
}

}  // namespace
}  // namespace pipelab::next_schedules_test
