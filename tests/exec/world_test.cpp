// The world a run's processes share (core/exec/world.h): one process's identities, the
// typed gathers of a c10d group with uneven contributions, and the trace rows that carry a
// process's actions to the writer's clock.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <future>

#include "core/processes/process_group.h"
#include "core/exec/process_world.h"
#include "core/exec/trace_merge.h"
#include "core/exec/world.h"

namespace pipelab::world_test {
namespace {

TEST(World, OneProcessCollectivesReturnWhatTheyAreGiven) {
  World one;
  EXPECT_TRUE(one.writes_records());
  EXPECT_EQ(one.process_name(), "");
  EXPECT_TRUE(one.any(true));
  EXPECT_FALSE(one.any(false));
  EXPECT_EQ(one.gather_text("k", "abc"), std::vector<std::string>{"abc"});
  EXPECT_EQ(gather_values(one, {3, -1, int64_t{1} << 60}),
            (std::vector<std::vector<int64_t>>{{3, -1, int64_t{1} << 60}}));
  EXPECT_EQ(gather_values(one, {}), (std::vector<std::vector<int64_t>>{{}}));
}

TEST(World, ProcessesGatherRowsOfDifferentCountsExactly) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  const int port = dist::free_port();
  std::vector<std::future<std::vector<std::vector<int64_t>>>> ranks;
  std::vector<std::future<bool>> flags;
  for (int p = 0; p < 3; ++p) {
    ranks.push_back(std::async(std::launch::async, [p, port] {
      dist::GroupOptions o;
      o.rank = p;
      o.world_size = 3;
      o.master.port = port;
      o.timeout_seconds = 60;
      ProcessWorld world(o);
      world.attach({0, 1, 2});  // one stage per rank
      EXPECT_EQ(world.process_name(), "rank" + std::to_string(p));
      EXPECT_EQ(world.writes_records(), p == 2) << "the last stage's rank writes";
      EXPECT_EQ(world.any(p == 1), true);
      EXPECT_EQ(world.any(false), false);
      // Rank p brings p values, the largest beyond a double's exact integers.
      std::vector<int64_t> mine;
      for (int k = 0; k < p; ++k) mine.push_back((int64_t{1} << 62) + 10 * p + k);
      return gather_values(world, mine);
    }));
  }
  const std::vector<std::vector<int64_t>> expected{{}, {(int64_t{1} << 62) + 10}, {(int64_t{1} << 62) + 20, (int64_t{1} << 62) + 21}};
  for (auto& r : ranks) EXPECT_EQ(r.get(), expected);
}

TEST(TraceRows, CarryEveryFieldAndMoveTimesOntoTheReadersClock) {
  ExecStats theirs;
  theirs.reset(3);
  theirs.peak_activation_bytes = {0, 0, 0};
  ActionRecord a;
  a.kind = ActionKind::BackwardWeight;
  a.mb = 7;
  a.start = 0.125;
  a.end = 0.5;
  a.device_start = 0.25;
  a.device_end = 0.375;
  a.bytes = int64_t{1} << 40;
  a.retained_bytes = 12345;
  a.peak_rise_bytes = 678;
  theirs.actions[1].push_back(a);
  theirs.actions[2].push_back(a);  // a stage this process does not send
  theirs.peak_activation_bytes[1] = 999;
  const at::Tensor rows = trace_rows(theirs, {1}, /*now=*/10.0);
  EXPECT_EQ(rows.size(1), kTraceColumns);
  EXPECT_EQ(rows.size(0), 3) << "now, one action, one peak";

  ExecStats mine;
  mine.reset(3);
  mine.peak_activation_bytes = {0, 0, 0};
  add_trace_rows(rows, /*now=*/12.5, mine);
  ASSERT_EQ(mine.actions[1].size(), 1u);
  EXPECT_TRUE(mine.actions[2].empty());
  const ActionRecord& b = mine.actions[1][0];
  EXPECT_EQ(b.kind, ActionKind::BackwardWeight);
  EXPECT_EQ(b.mb, 7);
  EXPECT_DOUBLE_EQ(b.start, 2.625);  // shifted by 12.5 - 10
  EXPECT_DOUBLE_EQ(b.end, 3.0);
  EXPECT_DOUBLE_EQ(b.device_start, 0.25);  // device clocks are their own
  EXPECT_DOUBLE_EQ(b.device_end, 0.375);
  EXPECT_EQ(b.bytes, int64_t{1} << 40);
  EXPECT_EQ(b.retained_bytes, 12345);
  EXPECT_EQ(b.peak_rise_bytes, 678);
  EXPECT_EQ(mine.peak_activation_bytes, (std::vector<int64_t>{0, 999, 0}));
}

}  // namespace
}  // namespace pipelab::world_test
