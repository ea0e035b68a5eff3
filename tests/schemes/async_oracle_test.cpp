// The asynchronous schemes against docs/schemes.md, "Toy pipeline": the toy pipeline's weights
// and losses after one epoch for every scheme and variant (configs A, B, C, derived there
// by an independent float64 scalar simulation), and the ring quirk (PipeDream's never-reset
// ring, docs/schemes.md, "Quirks") over two epochs.
#include <gtest/gtest.h>

#include "tests/schemes/toy_pipeline.h"

namespace pipelab::async_oracle_test {
namespace {

using testing::run_toy;
using testing::ToyConfig;
using V = std::vector<double>;

void expect_near(const V& got, const V& want, const std::string& what, double tolerance = 6e-7) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tolerance) << what << " [" << i << "]";
}

const ToyConfig kA{{1, 0.5, 2, -0.8}};
const ToyConfig kB{{1, 0.5, 2, -0.8}, 0.9, 0.01};
const ToyConfig kC{{1, 0.5, 2, -0.8, 1.5, 0.6}, 0.9, 0.01};

TEST(AsyncOracle, ConfigA) {
  struct Row {
    const char* scheme;
    V weights, losses;
  };
  const std::vector<Row> rows{
      {"{type: naive}", {0.873065, 0.238197, 1.937214, -0.640014}, {0.845000, 0.050262, 0.107453, 0.696689}},
      {"{type: async}", {0.853666, 0.124661, 1.916538, -0.575323}, {0.845000, 0.046561, 0.047404, 0.611624}},
      {"{type: pipedream}", {0.832181, 0.125808, 1.916664, -0.575732}, {0.845000, 0.046561, 0.047404, 0.609400}},
      {"{type: pipedream, variant: reference}", {0.832181, 0.125808, 1.916664, -0.575732}, {0.845000, 0.046561, 0.047404, 0.609400}},
      {"{type: pipedream, vertical_sync: true}", {0.781543, 0.016520, 1.891722, -0.524679}, {0.845000, 0.180000, 0.058301, 0.542674}},
      {"{type: spectrain, variant: reference}", {0.857942, 0.151846, 1.923574, -0.597970}, {0.845000, 0.046561, 0.003065, 0.568397}},
      {"{type: spectrain}", {0.857942, 0.151846, 1.923574, -0.597970}, {0.845000, 0.046561, 0.003065, 0.568397}},
      {"{type: pipeoptim}", {0.857942, 0.151846, 1.923574, -0.597970}, {0.845000, 0.046561, 0.003065, 0.568397}},
      {"{type: spectrain, version: 2, variant: reference}", {0.719364, -0.170954, 1.928820, -0.614558}, {0.845000, 0.046561, 0.003065, 0.468985}},
      {"{type: spectrain, version: 2}", {0.847108, 0.154045, 1.923725, -0.598449}, {0.845000, 0.046561, 0.003065, 0.565647}},
      {"{type: pipeoptim, variant: reference}", {0.876170, 0.229041, 1.936437, -0.636277}, {0.845000, 0.000284, 0.006013, 0.668959}},
  };
  for (const Row& row : rows) {
    const auto r = run_toy(row.scheme, kA);
    expect_near(r.weights, row.weights, std::string(row.scheme) + " weights");
    expect_near(r.losses, row.losses, std::string(row.scheme) + " losses");
  }
}

TEST(AsyncOracle, HandTraceOfConfigA) {
  // docs/schemes.md, "Toy pipeline"'s hand trace, after two mini-batches (two updates per stage): stage 0's second
  // backward reads b0 = 0.292 (vanilla: the storage has moved on) or the stashed b0 = 0.5
  // (PipeDream). b0's own gradient u_f * delta reads no weight, so it agrees (docs/schemes.md, "Equivalences").
  ToyConfig two = kA;
  two.examples = 2;
  expect_near(run_toy("{type: async}", two).weights, {0.87274029, 0.21234347, 1.92755428, -0.61055483}, "vanilla", 6e-9);
  expect_near(run_toy("{type: pipedream}", two).weights, {0.85617174, 0.21234347, 1.92755428, -0.61055483}, "pipedream",
              6e-9);
}

TEST(AsyncOracle, ConfigB) {
  const std::vector<std::pair<const char*, V>> rows{
      {"{type: naive}", {0.691020, -0.080335, 1.830014, -0.421840}},
      {"{type: async}", {0.577935, -0.491332, 1.742654, -0.163581}},
      {"{type: pipedream}", {0.514709, -0.490852, 1.742660, -0.163618}},
      {"{type: pipedream, vertical_sync: true}", {0.353393, -0.840048, 1.663716, 0.005019}},
      {"{type: spectrain, variant: reference}", {0.578394, -0.441073, 1.751343, -0.202176}},
      {"{type: spectrain}", {0.578149, -0.458160, 1.750972, -0.199999}},
      {"{type: spectrain, version: 2, variant: reference}", {0.080966, -1.403394, 1.752069, -0.205989}},
      {"{type: spectrain, version: 2}", {0.533764, -0.457268, 1.750853, -0.199347}},
      {"{type: pipeoptim, variant: reference}", {0.686686, -0.065700, 1.836004, -0.432269}},
      {"{type: pipeoptim}", {0.578149, -0.458160, 1.750972, -0.199999}},  // = v1 paper at D = 2
  };
  for (const auto& [scheme, weights] : rows) expect_near(run_toy(scheme, kB).weights, weights, scheme);
}

TEST(AsyncOracle, ConfigCThreeStages) {
  // D = 3 exercises SpecTrain v1's backward prediction at r = 2 (s_b = 1).
  const std::vector<std::pair<const char*, V>> rows{
      {"{type: naive}", {0.756373, 0.069818, 1.862609, -0.503731, 1.328024, 0.223096}},
      {"{type: async}", {0.678899, -0.162528, 1.817641, -0.371861, 1.262949, -0.008220}},
      {"{type: pipedream}", {0.657723, -0.174097, 1.815209, -0.371862, 1.262949, -0.008216}},
      {"{type: pipedream, vertical_sync: true}", {0.403695, -0.692137, 1.688836, -0.057532, 1.095479, -0.389745}},
      {"{type: spectrain, variant: reference}", {0.738444, 0.024519, 1.872019, -0.535669, 1.363576, 0.425335}},
      {"{type: spectrain}", {0.715663, -0.044299, 1.850474, -0.470667, 1.320212, 0.252205}},
      {"{type: spectrain, version: 2, variant: reference}", {0.005718, -1.465098, 1.640130, 0.032362, 1.269440, 0.031855}},
      {"{type: spectrain, version: 2}", {0.666985, -0.160059, 1.819655, -0.382797, 1.269478, 0.032162}},
      {"{type: pipeoptim, variant: reference}", {0.770470, 0.146306, 1.904453, -0.631335, 1.413629, 0.467646}},
      {"{type: pipeoptim}", {0.679618, -0.156346, 1.820463, -0.382797, 1.269478, 0.032162}},
  };
  for (const auto& [scheme, weights] : rows) expect_near(run_toy(scheme, kC).weights, weights, scheme);
}

TEST(AsyncOracle, RingQuirkQ11OverTwoEpochs) {
  ToyConfig two = kA;
  two.epochs = 2;
  expect_near(run_toy("{type: naive}", two).weights, {0.846292, 0.198827, 1.924965, -0.604170}, "single");
  expect_near(run_toy("{type: pipedream, variant: reference}", two).weights, {0.827385, 0.149330, 1.916154, -0.575185},
              "ring carried over");
  expect_near(run_toy("{type: pipedream}", two).weights, {0.831050, 0.149024, 1.916125, -0.575090}, "ring reset");
  expect_near(run_toy("{type: spectrain, version: 2, variant: reference}", two).weights,
              {0.586610, 0.174961, 1.905924, -0.541797}, "v2 code, carried over");
}

}  // namespace
}  // namespace pipelab::async_oracle_test
