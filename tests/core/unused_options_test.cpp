// Options a run would ignore are errors at their key (issue: hardening, fourth round): within
// one options struct through `unused_unless` (the clip's norm and scope without a clip), and
// against the run's plan where only the plan knows (a codec that codes no message of the
// training schedule, tied_gradients on a model without tied weights). Each message names the
// key and the fix; the same options in a run that uses them train.
#include <gtest/gtest.h>

#include "tests/support/helpers.h"

namespace pipelab::unused_options_test {
namespace {

const char* kTwoStages = R"(
model:     {type: mlp, sizes: [8, 16, 16, 3]}
dataset:   {type: synthetic, samples: 32, test_samples: 8, shape: [8], classes: 3}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 16, seed: 3, threads: 1}
)";

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

std::string refusal(const std::vector<std::string>& overrides) {
  return testing::user_error([&] { testing::train(kTwoStages, overrides); });
}

TEST(UnusedOptions, TheClipsNormAndScopeNeedAClip) {
  for (const std::string key : {"clip_norm_type=inf", "clip_scope=per_stage"}) {
    const std::string e = refusal({"optimizer." + key});
    EXPECT_HAS(e, "optimizer." + key.substr(0, key.find('=')) + ": " + key.substr(0, key.find('=')) +
                      " does nothing unless clip_grad_norm is set");
    EXPECT_HAS(e, "Fix: remove");
    EXPECT_EQ(refusal({"optimizer." + key, "optimizer.clip_grad_norm=1"}), "");
  }
}

TEST(UnusedOptions, TiedGradientsNeedTiedWeights) {
  const std::string e = refusal({"optimizer.tied_gradients=separate"});
  EXPECT_HAS(e, "optimizer.tied_gradients: tied_gradients does nothing unless the model ties weights");
  EXPECT_HAS(e, "Fix: remove tied_gradients, or tie the model's weights");
}

TEST(UnusedOptions, ACodecThatCodesNoMessageOfThePlan) {
  const std::string activations = "compression={activations: {type: cast, dtype: bf16}}";
  const std::string gradients = "compression={gradients: {type: cast, dtype: bf16}}";
  // One stage: no boundary at all; `single` x replicas: replicas exchange no activations.
  for (const std::vector<std::string>& o : std::vector<std::vector<std::string>>{
           {activations, "partition.stages=1", "scheme={type: single}"},
           {activations, "scheme={type: single}", "partition.stages=1", "partition.replicas=2"},
           {activations, "compression.boundaries=client_server", "partition.stages=1", "scheme={type: single}"}}) {
    const std::string e = refusal(o);
    EXPECT_HAS(e, "compression.activations: no activation crosses a compressed boundary in this run");
    EXPECT_HAS(e, "Fix: remove it");
  }
  // dgl trains each stage on a local loss: no gradient travels back.
  const std::string e = refusal({gradients, "scheme={type: dgl}"});
  EXPECT_HAS(e, "compression.gradients: no gradient crosses a compressed boundary in this run");
  EXPECT_EQ(refusal({activations, "scheme={type: dgl}"}), "");
  EXPECT_EQ(refusal({gradients}), "");
  // A listed boundary that messages cross (the SENDs' peers are the schedule's, not a field).
  EXPECT_EQ(refusal({activations, "compression.boundaries=client_server"}), "");
  EXPECT_EQ(refusal({activations, "compression.boundaries=[0]"}), "");
}

}  // namespace
}  // namespace pipelab::unused_options_test
