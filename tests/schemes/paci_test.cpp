// `paci` against docs/schemes.md, "Notation and optimizers" (PACI): the schedule (1F1B, U after every a-th backward and
// the last), the versions each F and B reads (its versions oracle in docs/schemes.md, "Notation and optimizers"), the
// docs/schemes.md, "Toy pipeline" toy's weights after one epoch for every backward mode and a = 1, 2, 4 at D = 2 and a
// = 2 at D = 3 (its toy oracle in docs/schemes.md, "Notation and optimizers"), a = 1 bit for bit as `async`, and its
// refusals.
#include <gtest/gtest.h>

#include "core/scheme/scheme.h"
#include "tests/schemes/toy_pipeline.h"
#include "tests/support/helpers.h"

namespace pipelab::paci_test {
namespace {

using testing::run_toy;
using testing::ToyConfig;
using V = std::vector<double>;

std::unique_ptr<Scheme> scheme(const std::string& yaml) {
  return Registry<Scheme>::get().create(ConfigNode(YAML::Load(yaml), std::make_shared<ConfigSource>("t"), "scheme"));
}

TEST(Paci, ScheduleIsOneFOneBWithAnUpdateAfterEveryAthBackward) {
  EXPECT_EQ(scheme("{type: paci, accumulation: 2}")->schedule(2, 5),
            Schedule::parse("0F0 0F1 0B0 0F2 0B1 0U 0F3 0B2 0F4 0B3 0U 0B4 0U\n"
                            "1F0 1B0 1F1 1B1 1U 1F2 1B2 1F3 1B3 1U 1F4 1B4 1U\n",
                            "golden"));
  // a = 1 is 1F1B itself.
  EXPECT_EQ(scheme("{type: paci}")->schedule(4, 6), scheme("{type: async}")->schedule(4, 6));
}

/// "F/B" optimizer steps (U actions) seen before F_j and B_j at each stage.
std::vector<std::vector<std::string>> versions(int stages, int a, int units) {
  const Schedule s = scheme(fmt::format("{{type: paci, accumulation: {}}}", a))->schedule(stages, units);
  std::vector<std::vector<std::string>> out(static_cast<size_t>(stages), std::vector<std::string>(units));
  for (int r = 0; r < stages; ++r) {
    int updates = 0;
    std::vector<int> forward(units);
    for (const Action& x : s.device(r)) {
      if (x.kind == ActionKind::Update) ++updates;
      if (x.kind == ActionKind::Forward) forward[x.mb] = updates;
      if (x.kind == ActionKind::Backward) out[r][x.mb] = fmt::format("{}/{}", forward[x.mb], updates);
    }
  }
  return out;
}

TEST(Paci, VersionsAsO27) {
  using S = std::vector<std::vector<std::string>>;
  EXPECT_EQ(versions(2, 2, 4), (S{{"0/0", "0/0", "0/1", "1/1"}, {"0/0", "0/0", "1/1", "1/1"}}));
  EXPECT_EQ(versions(3, 2, 4),
            (S{{"0/0", "0/0", "0/1", "0/1"}, {"0/0", "0/0", "0/1", "1/1"}, {"0/0", "0/0", "1/1", "1/1"}}));
}

void expect_near(const V& got, const V& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 6e-7) << what << " [" << i << "]";
}

TEST(Paci, ToyWeightsAsO28) {
  const ToyConfig a{{1, 0.5, 2, -0.8}};
  struct Row {
    int accumulation;
    const char* backward;
    V weights;
  };
  const std::vector<Row> rows{
      // a = 1: vanilla (live), PipeDream (stash) and a replayed forward.
      {1, "live", {0.853666, 0.124661, 1.916538, -0.575323}},
      {1, "stash", {0.832181, 0.125808, 1.916664, -0.575732}},
      {1, "recompute", {0.852744, 0.134090, 1.916276, -0.574478}},
      {2, "live", {0.875380, 0.221809, 1.933528, -0.627415}},
      {2, "stash", {0.866718, 0.221809, 1.933528, -0.627415}},
      {2, "recompute", {0.875380, 0.226140, 1.933528, -0.627415}},
      // a = 4 >= the epoch's 4 micro-batches: one flushed update.
      {4, "live", {0.92, 0.34, 1.96, -0.70}},
      {4, "stash", {0.92, 0.34, 1.96, -0.70}},
      {4, "recompute", {0.92, 0.34, 1.96, -0.70}},
  };
  for (const Row& r : rows) {
    const std::string s = fmt::format("{{type: paci, accumulation: {}, backward: {}}}", r.accumulation, r.backward);
    expect_near(run_toy(s, a).weights, r.weights, s);
  }
  // D = 3 from config C's weights without momentum or decay.
  expect_near(run_toy("{type: paci, accumulation: 2}", ToyConfig{{1, 0.5, 2, -0.8, 1.5, 0.6}}).weights,
              {0.905015, 0.293223, 1.948038, -0.665754, 1.429025, 0.411078}, "D = 3, a = 2");
}

TEST(Paci, OneIsAsyncBitForBit) {
  const ToyConfig c{{1, 0.5, 2, -0.8, 1.5, 0.6}, 0.9, 0.01};
  EXPECT_EQ(run_toy("{type: paci}", c).weights, run_toy("{type: async}", c).weights);
  EXPECT_EQ(run_toy("{type: paci, backward: stash}", c).weights, run_toy("{type: pipedream, variant: paper}", c).weights);
}

TEST(Paci, BadOptionsAreRefused) {
  EXPECT_NE(testing::user_error([] { scheme("{type: paci, accumulation: 0}"); }).find("accumulation"), std::string::npos);
  EXPECT_NE(testing::user_error([] { scheme("{type: paci, backward: mem}"); }).find("recompute"), std::string::npos);
}

}  // namespace
}  // namespace pipelab::paci_test
