// partition.offload where nothing would move (the sixth hostile-input round): what the run can
// tell before it starts is refused at its key (an empty list of stages, a block on a stage that
// does not offload, a stage no OFFLOAD is placed on: the last stage of 1F1B, naive model
// parallelism, a prefetch longer than any micro-batch waits, stages that all recompute, a
// custom schedule that moves activations itself); what only the run sees (a one-block stage,
// whose saved tensors are its input and output) is said in its summary. The planner prices
// only what a stage can move.
#include <gtest/gtest.h>

#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"
#include "tools/simulate/derive.h"

namespace pipelab::offload_refusals_test {
namespace {

std::string experiment(const std::string& partition, const std::string& scheme = "{type: pipedream_flush, chunks: 4}") {
  return fmt::format(R"(
model:     {{type: mlp, sizes: [8, 16, 16, 16, 16, 4]}}
dataset:   {{type: synthetic, samples: 32, test_samples: 8, shape: [8], classes: 4}}
partition: {}
scheme:    {}
optimizer: {{type: sgd, lr: 0.05}}
run:       {{epochs: 1, batch_size: 8, seed: 1, threads: 1, progress: false}}
)",
                     partition, scheme);
}

std::string refusal(const std::string& yaml) {
  return testing::user_error([&] {
    Experiment e = testing::experiment(yaml);
    Runner r(e);
  });
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(OffloadRefusals, AnEmptyListOfStagesIsRefusedAsAMapWithoutStagesIs) {
  const std::string e = refusal(experiment("{stages: 2, offload: {stages: []}}"));
  EXPECT_HAS(e, "partition.offload.stages");
  EXPECT_HAS(e, "an empty list");
}

TEST(OffloadRefusals, BlocksMustLieOnTheStagesThatOffload) {
  std::string e = refusal(experiment("{stages: 2, balance: [3, 2], offload: {stages: [0], blocks: [fc5]}}"));
  EXPECT_HAS(e, "partition.offload.blocks[0]");
  EXPECT_HAS(e, "block 'fc5' is on pipeline stage 1, which does not offload");
  // (GPipe: every stage's micro-batches wait for their backwards.)
  e = refusal(experiment("{stages: 2, balance: [3, 2], offload: {stages: [0, 1], blocks: [fc1]}}",
                         "{type: gpipe, chunks: 4, checkpoint: never}"));
  EXPECT_HAS(e, "partition.offload.stages[1]");
  EXPECT_HAS(e, "stage 1 holds none of partition.offload.blocks");
}

TEST(OffloadRefusals, AStageNoOffloadIsPlacedOnIsNamed) {
  // 1F1B's last stage runs each backward right after its forward.
  std::string e = refusal(experiment("{stages: 2, offload: {stages: [1]}}"));
  EXPECT_HAS(e, "partition.offload.stages[0]");
  EXPECT_HAS(e, "stage 1 offloads nothing: under scheme pipedream_flush");
  // A prefetch longer than any micro-batch waits.
  e = refusal(experiment("{stages: 2, offload: {stages: [0], prefetch: 65536}}"));
  EXPECT_HAS(e, "stage 0 offloads nothing");
  // Naive model parallelism: one micro-batch in flight, none waits on its device.
  e = refusal(experiment("{stages: 2, offload: {stages: [0]}}", "{type: naive}"));
  EXPECT_HAS(e, "stage 0 offloads nothing: under scheme naive");
  // Every stage recomputes its forward: nothing is kept to move.
  e = refusal(experiment("{stages: 2, offload: {stages: always}}", "{type: gpipe, chunks: 4, checkpoint: always}"));
  EXPECT_HAS(e, "partition.offload");
  EXPECT_HAS(e, "no stage offloads anything");
  e = refusal(experiment("{stages: 1, offload: {stages: always}}", "{type: dp, replicas: 2}"));
  EXPECT_HAS(e, "no stage offloads anything");
}

TEST(OffloadRefusals, ACustomScheduleThatMovesActivationsItselfTakesNoPass) {
  testing::TempDir dir;
  testing::write_text(dir.file("s.sched"), "d0: 0F0 0OFFLOAD0 0F1 0RELOAD0 0B0 0F2 0B1 0F3 0B2 0B3 0U\n"
                                           "d1: 1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3 1U\n");
  const std::string e = refusal(experiment("{stages: 2, offload: {stages: [0]}}",
                                           "{type: custom, file: '" + dir.file("s.sched") + "'}"));
  EXPECT_HAS(e, "partition.offload");
  EXPECT_HAS(e, "own schedule moves activations already (its OFFLOAD of stage 0, micro-batch 0)");
  // The schedule's own moves run without the pass.
  Experiment ok = testing::experiment(experiment("{stages: 2}", "{type: custom, file: '" + dir.file("s.sched") + "'}"));
  EXPECT_NO_THROW(Runner r(ok));
}

TEST(OffloadRefusals, AOneBlockStageMovesNothingAndTheSummarySaysSo) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), experiment("{stages: 2, balance: [1, 4], offload: {stages: [0], fraction: 1}}"));
  const auto [code, out] = testing::pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("run")));
  ASSERT_EQ(code, 0) << out;
  EXPECT_HAS(out, "partition.offload: the OFFLOADs of stage 0 moved nothing");
}

// Derived costs: a stage keeps its output for its backward, which no OFFLOAD moves, so a stage
// of one block whose saved tensors are its input and output offers nothing to move.
TEST(OffloadRefusals, DerivedCostsOfferOnlyWhatAStageCanMove) {
  std::vector<BlockProfile> blocks(3);
  for (BlockProfile& b : blocks) {
    b.output_shape = {16};
    b.flops = b.weight_flops = 100;
    b.live = {TensorProfile{"out", {16}, 64, true}};
  }
  sim::BlockMemory memory;
  memory.retained_per_example = {64, 64, 128};  // each its output; the last one's loss keeps more
  sim::DeviceSpec device;
  device.tflops = 1;
  const sim::SimCosts c = sim::derive_costs(blocks, memory, {1, 2}, 2, device);
  EXPECT_EQ(c.stages[0].retained_bytes, 128);
  EXPECT_EQ(c.stages[0].offloaded_bytes(), 0);          // its one block's output stays
  EXPECT_EQ(c.stages[1].offloaded_bytes(), 2 * (64 + 128));  // the last stage sends nothing on
}

}  // namespace
}  // namespace pipelab::offload_refusals_test
