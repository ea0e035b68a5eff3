// Re-placing a schedule's stages on devices (core/schedule/place.h): gpipe_test's client
// holding the first and the last stage. The merged order is derived by hand from the unit-cost
// replay (F 1, B 2, U 0.25; a message arrives when sent); every stage keeps its own order, the
// result validates (no deadlock), and bad placements are clear errors.
#include <gtest/gtest.h>

#include "core/config/yaml_file.h"
#include "core/schedule/generators.h"
#include "core/schedule/lower.h"
#include "core/schedule/place.h"
#include "core/schedule/validate.h"
#include "tests/support/helpers.h"

namespace pipelab::place_test {
namespace {

/// Stage `stage`'s compute actions, in order, over all devices.
std::vector<Action> stage_order(const Schedule& s, int stage) {
  std::vector<Action> out;
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) {
      if (a.stage == stage) out.push_back(a);
    }
  }
  return out;
}

TEST(Place, GpipeTestsClientHoldsTheFirstAndTheLastStage) {
  // GPipe, 3 stages, 2 micro-batches, stages 0 and 2 on device 0. On three devices the
  // replay puts 0F0 at 0, 0F1 at 1, 2F0 at 2, 2F1 at 3, 2B1 at 4, 2B0 at 6, 0B1 and 2U at 8
  // (stage 0's old device first), 0B0 at 10, 0U at 12.
  const Schedule placed = place_stages(schedules::gpipe(3, 2), {0, 1, 0});
  ASSERT_EQ(placed.devices(), 2);
  EXPECT_EQ(placed.compute_only().to_text(),
            "d0: 0F0 0F1 2F0 2F1 2B1 2B0 0B1 2U 0B0 0U\n"
            "d1: 1F0 1F1 1B1 1B0 1U\n");
  EXPECT_EQ(placed.placement(), (std::vector<int>{0, 1, 0}));
  EXPECT_NO_THROW(validate_schedule(placed));
}

TEST(Place, EveryStageKeepsItsOrderAndNothingDeadlocks) {
  const std::vector<std::pair<Schedule, std::vector<int>>> cases{
      {schedules::gpipe(5, 4), {0, 1, 2, 3, 0}},
      {schedules::one_f_one_b(4, 8), {0, 1, 1, 0}},
      {schedules::one_f_one_b(4, 8), {0, 0, 0, 0}},
      {schedules::naive(3, 2), {0, 0, 1}},
  };
  for (const auto& [s, placement] : cases) {
    const Schedule placed = place_stages(s, placement);
    EXPECT_NO_THROW(validate_schedule(placed)) << placed.to_text();
    for (int stage = 0; stage < s.stages(); ++stage) {
      EXPECT_EQ(stage_order(placed, stage), stage_order(with_communication(s), stage)) << stage;
    }
  }
}

TEST(Place, BadPlacementsAreClearErrors) {
  const auto read = [](const std::string& yaml) {
    auto source = std::make_shared<ConfigSource>("e.yaml");
    return ConfigValue<Placement>::read(ConfigNode(parse_yaml(yaml, "e.yaml"), source, "partition.placement"));
  };
  EXPECT_EQ(read("client_server").resolve(4), (std::vector<int>{0, 1, 2, 0}));
  EXPECT_TRUE(read("scheme").resolve(4).empty());
  EXPECT_EQ(read("[0, 1, 1, 0]").resolve(4), (std::vector<int>{0, 1, 1, 0}));
  EXPECT_NE(testing::user_error([&] { read("clientserver"); }).find("client_server"), std::string::npos);
  EXPECT_NE(testing::user_error([&] { read("[0, -1]"); }).find("partition.placement[1]"), std::string::npos);
  EXPECT_THROW(read("[0, 1]").resolve(3), std::invalid_argument);
  EXPECT_THROW(read("[0, 2, 0]").resolve(3), std::invalid_argument);  // device 1 holds nothing
  EXPECT_THROW(read("client_server").resolve(2), std::invalid_argument);
}

}  // namespace
}  // namespace pipelab::place_test
