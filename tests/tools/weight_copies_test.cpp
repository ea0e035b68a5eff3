// Weight versions priced (core/schedule/weight_copies.h, Scheme::weight_copies): the copies
// of a stage's weights PipeDream's stash and 2BW's double buffer make, counted by hand from
// their actions' order, and a replay that pays each at the stage's copy cost.
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

TEST(WeightCopies, PipeDreamsStashSwapsInABackwardsOlderVersion) {
  // F0 and F1 read version 0; B0 still has it live; the update stashes version 1 (1 copy);
  // F2 reads 1; B1 reads 0 (swapped in: 3); the next update stashes 2; B2 reads 1 (3).
  EXPECT_EQ(stash_copies(actions("F0 F1 B0 U F2 B1 U B2")), (std::vector<double>{0, 0, 0, 1, 0, 3, 1, 3}));
  // A split backward's I is the one that reads the weights.
  EXPECT_EQ(stash_copies(actions("F0 U I0")), (std::vector<double>{0, 1, 3}));
}

TEST(WeightCopies, TwoBwsDoubleBufferSwapsInTheOlderOnceAnUpdateIsMade) {
  // m = 2: micro-batches 0, 1 are mini-batch 0, 2, 3 mini-batch 1 (reading W_0), 4 mini-batch 2
  // (reading W_1). Before the first update everything reads the live W_0; after it, mini-batch
  // 1's actions read the older buffer; mini-batch 2's F reads the live W_1 until the next update.
  EXPECT_EQ(double_buffer_copies(actions("F0 F1 F2 B0 B1 U F3 B2 B3 F4 U B4"), 2),
            (std::vector<double>{0, 0, 0, 0, 0, 1, 3, 3, 3, 0, 1, 3}));
}

sim::SimCosts one_stage(double copy_seconds) {
  sim::SimCosts c;
  sim::StageCosts k;
  k.seconds[ActionKind::Forward] = 1;
  k.seconds[ActionKind::Backward] = 2;
  k.seconds[ActionKind::Update] = 0.5;
  k.weight_copy_seconds = copy_seconds;
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

}  // namespace
}  // namespace pipelab::weight_copies_test
