// partition.recompute: activation checkpointing chosen stage by stage, for any scheme. A
// recomputed forward reads the weights its backward reads, so on a flushed schedule (and
// under PipeDream's weight stashing) it changes no number; it frees the activations of the
// stages it names and no other's; and a list that names a stage the pipeline lacks, or an
// unknown word, is refused at its key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"
#include "tests/tools/plan_support.h"

namespace pipelab::stage_recompute_test {
namespace {

const char* const kMlp = testing::kDeepMlp;

TEST(StageRecompute, ChangesNoNumberOfAnySchemeThatReadsTheForwardsWeights) {
  for (const std::string& scheme :
       std::vector<std::string>{"{type: pipedream_flush, chunks: 4}", "{type: zb_h1, chunks: 4}",
                                "{type: interleaved_1f1b, chunks: 4, virtual_stages: 2}", "{type: zbv, chunks: 4}",
                                "{type: gpipe, chunks: 4, checkpoint: never}", "{type: pipedream}"}) {
    const TensorDict kept = testing::train(kMlp, {"scheme=" + scheme});
    for (const char* recompute : {"always", "[0]", "except_last"}) {
      const TensorDict again = testing::train(kMlp, {"scheme=" + scheme, std::string("partition.recompute=") + recompute});
      EXPECT_TRUE(testing::identical(kept, again))
          << scheme << " recompute " << recompute << ": max difference " << testing::max_difference(kept, again);
    }
  }
  // With dropout on every block but the last, a recomputed forward replays each mask (from
  // the generator states it kept of the blocks that draw, and of none other).
  for (const std::string& scheme : std::vector<std::string>{"{type: pipedream_flush, chunks: 4}", "{type: zb_h1, chunks: 4}"}) {
    const std::vector<std::string> dropout{"scheme=" + scheme, "model.dropout=0.3"};
    const TensorDict kept = testing::train(kMlp, dropout);
    std::vector<std::string> recomputed = dropout;
    recomputed.push_back("partition.recompute=always");
    EXPECT_TRUE(testing::identical(kept, testing::train(kMlp, recomputed))) << scheme << " with dropout";
    EXPECT_GT(testing::max_difference(kept, testing::train(kMlp, {"scheme=" + scheme})), 1e-4) << "dropout drew no mask";
  }
  // ... and the runs above trained: another learning rate ends elsewhere.
  EXPECT_GT(testing::max_difference(testing::train(kMlp), testing::train(kMlp, {"optimizer.lr=0.1"})), 1e-4);
}

/// Each stage's measured peak above its weights (costs.json's device_peak_bytes) of a run
/// of kMlp with `flags`.
std::vector<double> stage_peaks(const std::string& flags) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kMlp);
  const auto [rc, log] = testing::pipelab(fmt::format("run --quiet {} --set run.output={} --set run.executor=sequential {}",
                                                      dir.file("e.yaml"), dir.file("run"), flags));
  EXPECT_EQ(rc, 0) << log;
  std::vector<double> out;
  const auto costs = nlohmann::json::parse(testing::read_text(dir.file("run/metrics/costs.json")));
  for (const auto& s : costs["stages"]) out.push_back(s["device_peak_bytes"].get<double>());
  return out;
}

TEST(StageRecompute, FreesTheActivationsOfTheStagesItNamesOnly) {
  const std::vector<double> kept = stage_peaks("");
  const std::vector<double> first = stage_peaks("--set 'partition.recompute=[0]'");
  ASSERT_EQ(kept.size(), 4u);
  ASSERT_EQ(first.size(), 4u);
  // Stage 0 keeps no activation of its own; what it sent on stays while stage 1 holds it.
  EXPECT_LT(first[0], 0.9 * kept[0]);
  for (size_t s = 1; s < 4; ++s) EXPECT_EQ(first[s], kept[s]) << "stage " << s;
}

TEST(StageRecompute, ABadListOrWordIsRefusedAtItsKey) {
  const auto error = [](const std::string& value) {
    return testing::user_error([&] { testing::experiment(kMlp, "", {"partition.recompute=" + value}); });
  };
  EXPECT_NE(error("sometimes").find("partition.recompute: unknown choice of stages 'sometimes'"), std::string::npos)
      << error("sometimes");
  EXPECT_NE(error("[1, 0]").find("partition.recompute[1]: stage 0 comes after stage 1"), std::string::npos) << error("[1, 0]");
  EXPECT_NE(error("[-1]").find("partition.recompute[0]"), std::string::npos) << error("[-1]");
  // A stage the pipeline lacks is found when the run plan is compiled, before any training.
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kMlp);
  const auto [rc, out] = testing::pipelab(fmt::format("run {} --set run.output={} --set 'partition.recompute=[0, 4]'",
                                                      dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("partition.recompute: stage 4 is not a pipeline stage: the pipeline has 4 (0 to 3)"),
            std::string::npos)
      << out;
  // Local-loss schemes differentiate each forward's graph themselves: refused at the key, exit
  // 2 (the fifth hardening probe: an internal error once training began).
  for (const char* scheme : {"{type: interlocking, mode: local}", "{type: dgl}"}) {
    const auto [code, text] = testing::pipelab(fmt::format("run {} --set run.output={} --set 'scheme={}' "
                                                           "--set partition.recompute=always",
                                                           dir.file("e.yaml"), dir.file("local"), scheme));
    EXPECT_EQ(code, 2) << text;
    EXPECT_NE(text.find("partition.recompute: scheme"), std::string::npos) << text;
    EXPECT_EQ(text.find("internal error"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace pipelab::stage_recompute_test
