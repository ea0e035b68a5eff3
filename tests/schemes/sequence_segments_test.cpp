// Sequence-level pipelines (Seq1F1B, TeraPipe; docs/schedules.md, "Sequence-level pipelines"): the
// causal language model computed segment by segment gives the whole sequence's gradients; the
// schedules are the reference's order (docs/schemes.md, "Notation and optimizers", Seq1F1B's golden order) and validate
// for every shape; every scheme that splits sequences equals `single` on whole sequences (float64),
// threaded equals sequential and `launch` equals one process bit for bit, one segment is
// pipedream_flush (or GPipe) bit for bit; and what cannot be cut is a clear error.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/config/config_node.h"
#include "core/experiment/plan_request.h"
#include "core/nn/sequence_segment.h"
#include "core/plan/run_plan.h"
#include "core/processes/process_group.h"
#include "core/schedule/generators.h"
#include "core/schedule/validate.h"
#include "core/scheme/sequence_split.h"
#include "schemes/schedules/modern.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"
#include "tests/support/scheme_cases.h"
#include "tests/tools/launch_support.h"
#include "tools/simulate/simulate.h"

namespace pipelab::sequence_segments_test {
namespace {

constexpr int64_t kWords = 20, kLength = 8;

DataSpec lm_spec() { return testing::word_windows(kWords, kLength); }

const char* kModel = "{type: transformer, head: lm, num_words: 20, d_model: 8, heads: 2, ff: 8, layers: 3, dropout: 0.0}";

/// Random windows and their next words, as a tensors dataset.
void write_windows(const std::string& path, int64_t n, int64_t seed) {
  torch::manual_seed(static_cast<uint64_t>(seed));
  const torch::Tensor x = torch::randint(kWords, {n, kLength}, torch::kLong);
  save_tensor_dict(path, {{"x", x}, {"y", torch::roll(x, -1, 1)}});
}

/// A 2-stage run of the model over 32 training windows, 2 steps of 16, in float64.
std::string lm_experiment(const testing::TempDir& dir) {
  write_windows(dir.file("train.pt"), 32, 1);
  write_windows(dir.file("test.pt"), 8, 2);
  return fmt::format(R"(
model:     {}
dataset:   {{type: tensors, path: {}, test_path: {}, classes: 20}}
partition: {{stages: 2}}
scheme:    {{type: single}}
optimizer: {{type: sgd, lr: 0.1, momentum: 0.9}}
run:       {{epochs: 1, batch_size: 16, seed: 3, dtype: float64, threads: 1, progress: false}}
)",
                     kModel, dir.file("train.pt"), dir.file("test.pt"));
}

// --- The model, segment by segment -------------------------------------------------------

/// The blocks' output on `x`, with its graph.
torch::Tensor logits_of(std::vector<Block>& blocks, const torch::Tensor& x) {
  LiveSet live(x);
  for (Block& b : blocks) live.run(b);
  return live.get("x");
}

/// Loss and parameter gradients of the blocks on `x` computed in `k` segments of `cuts`,
/// forwards in order and backwards in reverse, each segment's mean loss scaled by its share.
std::vector<torch::Tensor> segment_gradients(std::vector<Block>& blocks, const torch::Tensor& x,
                                             const torch::Tensor& y, const std::vector<int64_t>& cuts) {
  const int k = static_cast<int>(cuts.size()) - 1;
  std::vector<torch::Tensor> losses;
  for (int j = 0; j < k; ++j) {
    const nn::SequenceSegment segment{7, j, k, cuts[j], cuts[j + 1] - cuts[j], kLength};
    const nn::SegmentScope scope(&segment);
    const torch::Tensor logits = logits_of(blocks, x.narrow(1, cuts[j], segment.length));
    const torch::Tensor target = y.narrow(1, cuts[j], segment.length);
    losses.push_back(torch::cross_entropy_loss(logits.flatten(0, 1), target.flatten()) *
                     (double(segment.length) / kLength));
  }
  for (int j = k - 1; j >= 0; --j) losses[static_cast<size_t>(j)].backward();
  std::vector<torch::Tensor> grads;
  for (Block& b : blocks) {
    for (const torch::Tensor& p : b.module.ptr()->parameters()) grads.push_back(p.grad().clone());
  }
  return grads;
}

std::vector<Block> fresh_blocks() {
  torch::manual_seed(5);
  std::vector<Block> blocks = testing::build_model(testing::define_model(kModel, lm_spec()));
  for (Block& b : blocks) b.module.ptr()->to(torch::kDouble);
  return blocks;
}

TEST(SequenceSegments, SegmentGradientsAreTheWholeSequencesGradients) {
  torch::manual_seed(9);
  const torch::Tensor x = torch::randint(kWords, {3, kLength}, torch::kLong);
  const torch::Tensor y = torch::randint(kWords, {3, kLength}, torch::kLong);
  std::vector<Block> whole = fresh_blocks();
  const std::vector<torch::Tensor> want = segment_gradients(whole, x, y, {0, kLength});
  for (const std::vector<int64_t>& cuts :
       std::vector<std::vector<int64_t>>{{0, 4, 8}, {0, 1, 2, 3, 8}, {0, 5, 6, 7, 8}, {0, 1, 2, 3, 4, 5, 6, 7, 8}}) {
    SCOPED_TRACE(::testing::PrintToString(cuts));
    std::vector<Block> blocks = fresh_blocks();
    const std::vector<torch::Tensor> got = segment_gradients(blocks, x, y, cuts);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_LT((got[i] - want[i]).abs().max().item<double>(), 1e-12) << "parameter " << i;
    }
  }
}

TEST(SequenceSegments, ABackwardBeforeALaterSegmentsIsRefused) {
  // Segment 0's keys and values would miss segment 1's gradient: a wrong gradient, refused.
  std::vector<Block> blocks = fresh_blocks();
  const torch::Tensor x = torch::randint(kWords, {2, kLength}, torch::kLong);
  std::vector<torch::Tensor> outs;
  for (int j = 0; j < 2; ++j) {
    const nn::SequenceSegment segment{0, j, 2, 4 * j, 4, kLength};
    const nn::SegmentScope scope(&segment);
    outs.push_back(logits_of(blocks, x.narrow(1, 4 * j, 4)).sum());
  }
  EXPECT_ANY_THROW(outs[0].backward());
}

// --- Schedules ---------------------------------------------------------------------------

TEST(SequenceSchedules, Seq1f1bIsTheReferenceOrder) {
  // Seq1F1B's golden order (docs/schemes.md, "Notation and optimizers"): p = 4, m = 2, k = 2; unit u = (micro-batch u /
  // 2, segment u % 2).
  const Schedule s = schedules::one_f_one_b(4, 2, 2);
  EXPECT_EQ(s.segments(), 2);
  EXPECT_EQ(s.to_text(),
            "d0: 0F0 0F1 0F2 0F3 0B1 0U 0B0 0U 0B3 0U 0B2 0U\n"
            "d1: 1F0 1F1 1F2 1F3 1B1 1U 1B0 1U 1B3 1U 1B2 1U\n"
            "d2: 2F0 2F1 2F2 2B1 2U 2F3 2B0 2U 2B3 2U 2B2 2U\n"
            "d3: 3F0 3F1 3B1 3U 3F2 3B0 3U 3F3 3B3 3U 3B2 3U\n");
  // One segment is 1F1B.
  EXPECT_EQ(schedules::one_f_one_b(4, 6, 1), schedules::one_f_one_b(4, 6));
}

ValidateOptions rules(const std::vector<int>& bound) {
  ValidateOptions o;
  o.max_in_flight = bound;
  o.training = true;
  o.coverage = Coverage::EveryStage;
  return o;
}

TEST(SequenceSchedules, EveryShapeValidates) {
  for (int p = 1; p <= 5; ++p) {
    for (int m = 1; m <= 5; ++m) {
      for (int k = 1; k <= 4; ++k) {
        SCOPED_TRACE(fmt::format("p = {}, m = {}, k = {}", p, m, k));
        std::vector<int> bound;
        for (int r = 0; r < p; ++r) bound.push_back(p - r + k - 1);
        EXPECT_NO_THROW(validate_schedule(schedules::one_f_one_b(p, m, k), rules(bound)));
        Schedule tera = schedules::gpipe(p, m * k);
        tera.set_segments(k);
        EXPECT_NO_THROW(validate_schedule(tera, rules({})));
        for (int v = 2; v <= 3; ++v) {
          const int group = std::min(m, (p + k - 1) / k);
          if (k > 1 && m % group != 0) continue;
          if (k == 1 && m % std::max(1, m / p) != 0) continue;
          EXPECT_NO_THROW(validate_schedule(schedules::interleaved_1f1b(p, v, m, k), rules({}))) << "v = " << v;
        }
      }
    }
  }
}

TEST(SequenceSchedules, TheValidatorHoldsTheSegmentOrder) {
  Schedule wrong = Schedule::parse("0F0 0F1 0B0 0B1 0U\n1F0 1F1 1B1 1B0 1U\n");
  wrong.set_segments(2);
  const std::string backward = testing::user_error([&] { validate_schedule(wrong); });
  EXPECT_NE(backward.find("segment 0 of micro-batch 0 runs backward before segment 1"), std::string::npos) << backward;
  Schedule late = Schedule::parse("0F1 0F0 0B1 0B0 0U\n1F0 1F1 1B1 1B0 1U\n");
  late.set_segments(2);
  const std::string forward = testing::user_error([&] { validate_schedule(late); });
  EXPECT_NE(forward.find("segment 1 of micro-batch 0 runs forward before segment 0"), std::string::npos) << forward;
  Schedule half = Schedule::parse("0F0 0F1 0F2 0B2 0B1 0B0 0U\n");
  half.set_segments(2);
  EXPECT_NE(testing::user_error([&] { validate_schedule(half); }).find("do not make whole micro-batches"),
            std::string::npos);
}

TEST(SequenceSplit, CutsAsTheirModeSays) {
  SequenceSplit even{4, Segmentation::EqualTokens, 0};
  EXPECT_EQ(even.cuts(10), (std::vector<int64_t>{0, 2, 5, 7, 10}));
  EXPECT_EQ(even.cuts(4), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  // Attention alone (w = 0): the first e tokens cost e (e + 1) / 2; half of 36 falls at 5.52.
  SequenceSplit compute{2, Segmentation::EqualCompute, 0};
  EXPECT_EQ(compute.cuts(8), (std::vector<int64_t>{0, 6, 8}));
  // Every segment within one token's work of an equal share, later segments shorter.
  compute = {4, Segmentation::EqualCompute, 24};
  const std::vector<int64_t> c = compute.cuts(128);
  const double share = compute.work(0, 128) / 4, token = compute.work(127, 128);
  for (size_t j = 0; j + 1 < c.size(); ++j) {
    EXPECT_LE(std::abs(compute.work(c[j], c[j + 1]) - share), token) << j;
    if (j > 0) EXPECT_LE(c[j + 1] - c[j], c[j] - c[j - 1]);
  }
  double total = 0;
  for (size_t j = 0; j + 1 < c.size(); ++j) total += compute.work(c[j], c[j + 1]);
  EXPECT_NEAR(total / compute.work(0, 128), 1, 1e-12);
  // No segment is ever empty, even with more work in the first token than in all the rest.
  EXPECT_EQ((SequenceSplit{3, Segmentation::EqualCompute, 0}.cuts(3)), (std::vector<int64_t>{0, 1, 2, 3}));
}

// --- The simulator ---------------------------------------------------------------------------

std::unique_ptr<Scheme> scheme_of(const std::string& yaml) {
  return Registry<Scheme>::get().create(ConfigNode(YAML::Load(yaml), std::make_shared<ConfigSource>("t"), "scheme"));
}

/// `stages` stages, one whole micro-batch of a `length`-token sequence each: F = 1 s, B = 2 s,
/// `retained` bytes kept by a forward, free links.
sim::SimCosts whole_micro_batches(int stages, double length, double retained = 0) {
  sim::SimCosts c;
  for (int st = 0; st < stages; ++st) {
    sim::StageCosts k;
    k.seconds[ActionKind::Forward] = 1;
    k.seconds[ActionKind::Backward] = 2;
    k.retained_bytes = retained;
    c.stages.push_back(k);
  }
  c.sequence_length = length;
  c.micro_batch_size = 1;
  return c;
}

TEST(SequenceSimulator, TheBubbleIsThePapersFormula) {
  // Equal units (equal_compute makes every segment's work equal up to a token, nothing on a
  // 2^20-token sequence): 1F1B over k m units of (F + B) / k
  // takes (k m + p - 1) (F + B) / k, a bubble of (p - 1) / (k m + p - 1) (docs/schemes.md
  // docs/schemes.md, "Notation and optimizers", Seq1F1B), against 1F1B's (p - 1) / (m + p - 1).
  for (const int p : {2, 4}) {
    for (const int k : {1, 2, 4}) {
      const int m = 4;
      SCOPED_TRACE(fmt::format("p = {}, k = {}", p, k));
      const auto seq = scheme_of(fmt::format("{{type: seq1f1b, chunks: {}, segments: {}}}", m, k));
      const sim::SimResult r = sim::simulate(*seq, p, m, 1, whole_micro_batches(p, 1 << 20), {});
      EXPECT_NEAR(r.bubble, double(p - 1) / (k * m + p - 1), 1e-4);
      EXPECT_NEAR(r.makespan, (k * m + p - 1) * 3.0 / k, 1e-3 * r.makespan);
    }
  }
}

TEST(SequenceSimulator, UnitsKeepTheirShareOfTheActivations) {
  // Stage 0 of 4 holds 4 - 0 micro-batches under 1F1B, 4 + k - 1 units of 1/k under Seq1F1B.
  const sim::SimCosts costs = whole_micro_batches(4, 1 << 20, 1000);
  const auto flush = scheme_of("{type: pipedream_flush, chunks: 8}");
  const sim::SimResult whole = sim::simulate(*flush, 4, 8, 1, costs, {});
  EXPECT_NEAR(whole.peak_activation_bytes[0], 4000, 1);
  for (const int k : {2, 4}) {
    const auto seq = scheme_of(fmt::format("{{type: seq1f1b, chunks: 8, segments: {}}}", k));
    const sim::SimResult r = sim::simulate(*seq, 4, 8, 1, costs, {});
    EXPECT_NEAR(r.peak_activation_bytes[0], 1000.0 * (4 + k - 1) / k, 1) << k;
  }
  // Costs without a sequence length cannot be cut.
  sim::SimCosts unknown = costs;
  unknown.sequence_length = 0;
  const auto seq = scheme_of("{type: seq1f1b, chunks: 8}");
  EXPECT_NE(testing::user_error([&] { sim::simulate(*seq, 4, 8, 1, unknown, {}); }).find("give no sequence length"),
            std::string::npos);
  // Costs with a length shorter than the segments: the length is named, not said missing.
  sim::SimCosts short_ones = costs;
  short_ones.sequence_length = 16;
  const auto many = scheme_of("{type: seq1f1b, chunks: 8, segments: 64}");
  const std::string too_many = testing::user_error([&] { sim::simulate(*many, 4, 8, 1, short_ones, {}); });
  EXPECT_NE(too_many.find("cuts each sequence into 64 segments, but the sequences have 16 tokens. Fix: use at most 16 "
                          "segments"),
            std::string::npos)
      << too_many;
}

TEST(SequenceSimulator, TimedCostsPriceShortSegmentsByTheirSize) {
  // Blocks timed here at several sizes (StageCosts::timed_seconds): F + B of one whole
  // sequence 3 s, of a quarter of one 1.5 s (1 s fixed, 2 s per sequence). Segment j with t_j
  // of the tokens and w_j of the work costs (1 + 2 t_j) w_j / t_j of those 3 s, not w_j: over
  // m micro-batches the stage computes m * sum_j (1 + 2 t_j) w_j / t_j seconds.
  const double length = 1 << 20;
  sim::SimCosts timed = whole_micro_batches(2, length);
  for (sim::StageCosts& k : timed.stages) k.timed_seconds = {{0.25, 1.0}, {1.5, 3.0}};
  for (const int k : {2, 4}) {
    const auto seq = scheme_of(fmt::format("{{type: seq1f1b, chunks: 4, segments: {}}}", k));
    const SequenceSplit split = seq->sequence_split();
    const std::vector<int64_t> cuts = split.cuts(static_cast<int64_t>(length));
    double expected = 0;
    for (int j = 0; j < k; ++j) {
      const double t = static_cast<double>(cuts[j + 1] - cuts[j]) / length;
      const double w = split.work(cuts[j], cuts[j + 1]) / split.work(0, static_cast<int64_t>(length));
      expected += 4 * (1 + 2 * t) * w / t;
    }
    EXPECT_NEAR(sim::simulate(*seq, 2, 4, 1, timed, {}).busy[0], expected, 1e-9) << k;
    // Without the curve, the segments share the micro-batch's seconds by their work.
    EXPECT_NEAR(sim::simulate(*seq, 2, 4, 1, whole_micro_batches(2, length), {}).busy[0], 4 * 3.0, 1e-9) << k;
    EXPECT_GT(expected, 4 * 3.0 * 1.2) << k;
  }
}

TEST(SequenceSimulator, RaggedMicroBatchesCostTheirLength) {
  // One stage does every unit in turn: F + B = 3 s a micro-batch of the costs' 64 tokens, and
  // micro-batches of 32 and 64 tokens take 1.5 and 3 s, whole or in segments.
  const sim::SimCosts costs = whole_micro_batches(1, 64);
  sim::SimOptions ragged;
  ragged.lengths = {32, 64};
  for (const char* scheme : {"{type: pipedream_flush, chunks: 4}", "{type: seq1f1b, chunks: 4, segments: 2}"}) {
    const auto s = scheme_of(scheme);
    EXPECT_NEAR(sim::simulate(*s, 1, 4, 1, costs, {}).makespan, 4 * 3.0, 1e-9) << scheme;
    EXPECT_NEAR(sim::simulate(*s, 1, 4, 1, costs, ragged).makespan, 2 * (1.5 + 3.0), 1e-9) << scheme;
  }
  // Costs without a sequence length have nothing to scale.
  sim::SimCosts lengthless = costs;
  lengthless.sequence_length = 0;
  const std::string error = testing::user_error(
      [&] { sim::simulate(*scheme_of("{type: pipedream_flush, chunks: 4}"), 1, 4, 1, lengthless, ragged); });
  EXPECT_NE(error.find("--tokens"), std::string::npos) << error;
  ragged.lengths = {65};
  EXPECT_NE(testing::user_error([&] { sim::simulate(*scheme_of("{type: pipedream_flush, chunks: 4}"), 1, 4, 1, costs, ragged); })
                .find("1 to 64 tokens"),
            std::string::npos);
}

// --- Runs --------------------------------------------------------------------------------

class SequenceSchemes : public ::testing::TestWithParam<testing::SchemeCase> {};

std::vector<std::string> case_sets(const testing::SchemeCase& c, int k, bool tie) {
  return {"scheme=" + c.scheme, fmt::format("scheme.segments={}", k), fmt::format("partition.stages={}", c.stages),
          fmt::format("model.tie_embeddings={}", tie)};
}

TEST_P(SequenceSchemes, EqualSingleOnWholeSequences) {
  testing::TempDir dir;
  const std::string yaml = lm_experiment(dir);
  for (const bool tie : {false, true}) {
    const TensorDict single = testing::train(yaml, {fmt::format("model.tie_embeddings={}", tie)});
    for (const int k : {1, 2, 4}) {
      SCOPED_TRACE(fmt::format("k = {}, tie_embeddings = {}", k, tie));
      const TensorDict run = testing::train(yaml, case_sets(GetParam(), k, tie));
      EXPECT_LT(testing::max_difference(single, run), 1e-10);
    }
  }
}

TEST_P(SequenceSchemes, ThreadedEqualsSequentialBitwise) {
  testing::TempDir dir;
  const std::string yaml = lm_experiment(dir);
  std::vector<std::string> sets = case_sets(GetParam(), 4, true);
  sets.push_back("run.executor=sequential");
  const TensorDict sequential = testing::train(yaml, sets);
  sets.back() = "run.executor={type: threaded, intra_op_threads: 1}";
  const TensorDict threaded = testing::train(yaml, sets);
  EXPECT_TRUE(testing::identical(sequential, threaded)) << testing::max_difference(sequential, threaded);
}

TEST_P(SequenceSchemes, LaunchEqualsOneProcessBitwise) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  const testing::SchemeCase& c = GetParam();
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), lm_experiment(dir));
  const std::string sets = fmt::format("--set 'scheme={}' --set partition.stages={} --set model.tie_embeddings=true",
                                       c.scheme, c.stages);
  const auto [c1, out1] = testing::pipelab(
      fmt::format("run {} --quiet {} --set run.output={}", dir.file("e.yaml"), sets, dir.file("one")));
  ASSERT_EQ(c1, 0) << out1;
  const auto [c2, out2] = testing::pipelab(fmt::format("launch --nproc {} {} {} --set run.output={}", c.devices,
                                                       dir.file("e.yaml"), sets, dir.file("many")));
  ASSERT_EQ(c2, 0) << out2;
  testing::expect_same_run(dir.file("one"), dir.file("many"));
}

INSTANTIATE_TEST_SUITE_P(Registry, SequenceSchemes, ::testing::ValuesIn(testing::sequence_scheme_cases()),
                         testing::scheme_case_name);

TEST(SequenceSchemes, OneSegmentIsPipedreamFlushAndGpipeBitwise) {
  testing::TempDir dir;
  const std::string yaml = lm_experiment(dir);
  const auto run = [&](const std::string& scheme) {
    return testing::train(yaml, {"scheme=" + scheme, "partition.stages=4"});
  };
  EXPECT_TRUE(testing::identical(run("{type: seq1f1b, chunks: 4, segments: 1}"),
                                 run("{type: pipedream_flush, chunks: 4}")));
  EXPECT_TRUE(testing::identical(run("{type: terapipe, chunks: 4, segments: 1}"),
                                 run("{type: gpipe, chunks: 4, checkpoint: never}")));
}

TEST(SequenceSchemes, WhatCannotBeCutIsAClearError) {
  testing::TempDir dir;
  const std::string yaml = lm_experiment(dir);
  const auto error = [&](const std::vector<std::string>& sets) {
    return testing::user_error([&] { testing::train(yaml, sets); });
  };
  // The plan refuses it (every command compiles it), before any data is read.
  const std::string classifier = testing::user_error([&] {
    RunPlan::compile(plan_request(testing::experiment(yaml, "", {"scheme={type: seq1f1b}", "model.head=classifier"})));
  });
  EXPECT_NE(classifier.find("scheme.segments"), std::string::npos) << classifier;
  EXPECT_NE(classifier.find("the model computes whole sequences only"), std::string::npos) << classifier;
  const std::string recompute = error({"scheme={type: terapipe}", "partition.recompute=always"});
  EXPECT_NE(recompute.find("partition.recompute"), std::string::npos) << recompute;
  const std::string too_many = error({"scheme={type: seq1f1b, segments: 9}"});
  EXPECT_NE(too_many.find("9 segments per sequence, but the examples have shape [8]"), std::string::npos) << too_many;
  EXPECT_NE(too_many.find("use at most 8 segments"), std::string::npos) << too_many;
}

}  // namespace
}  // namespace pipelab::sequence_segments_test
