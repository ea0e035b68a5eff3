// OFFLOAD and RELOAD run (partition.offload; core/stage/saved_tensors.h): a stage moves the
// activations only its saved tensors hold to a host pool and back, the backward reads the
// same bits, so every synchronous scheme trains to the same weights with and without
// offload, in one thread, one thread per device and one process per device; the device's
// measured peak drops and the host's holds what moved.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <yaml-cpp/yaml.h>

#include "core/processes/process_group.h"
#include "core/scheme/replicas.h"
#include "core/scheme/scheme.h"
#include "core/stage/stage.h"
#include "core/util/error.h"
#include "core/config/registry.h"
#include "tests/support/helpers.h"
#include "tests/support/scheme_cases.h"
#include "tests/tools/launch_support.h"

namespace pipelab::offload_test {
namespace {

// The every-scheme suites' experiment (testing::kEverySchemeMlp) has dropout and batch norm,
// so that masks and statistics are among what moves.

/// A first stage of two stages: Linear(8, 16), ReLU, Linear(16, 8) ("l1", "relu", "l2"),
/// float32, packing what `blocks` save (empty: every block).
std::unique_ptr<Stage> first_stage(std::vector<std::string> blocks = {}) {
  torch::manual_seed(1);
  StageSpec spec;
  spec.count = 2;
  spec.offload_blocks = std::move(blocks);
  spec.blocks = {{"l1", torch::nn::AnyModule(torch::nn::Linear(8, 16))},
                 {"relu", torch::nn::AnyModule(torch::nn::ReLU())},
                 {"l2", torch::nn::AnyModule(torch::nn::Linear(16, 8))}};
  return std::make_unique<Stage>(std::move(spec));
}

std::vector<at::Tensor> gradients(Stage& stage) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : stage.parameters()) out.push_back(p.grad().clone());
  return out;
}

TEST(OffloadStage, MovesOnlyWhatTheSavedTensorsAloneHoldAndTheBackwardReadsTheSameBits) {
  const at::Tensor x = at::randn({4, 8}, at::TensorOptions().dtype(at::kFloat).requires_grad(false));
  const at::Tensor dy = at::randn({4, 8});
  auto plain = first_stage();
  plain->forward(0, x);
  plain->backward(0, dy);

  auto moved = first_stage();
  std::vector<const void*> weights;
  for (const at::Tensor& p : moved->parameters()) weights.push_back(p.data_ptr());
  ForwardOptions options;
  options.offloadable = true;
  const ForwardResult out = moved->forward(0, x, options);
  // What moves: the ReLU's output, which the ReLU's backward and the second Linear's read
  // (one storage, 4 x 16 floats). Not the input (the caller holds it), not the weights or
  // the view of one the second Linear saves (the module holds them), not the output (sent on).
  EXPECT_EQ(moved->offload(0), 4 * 16 * 4);
  EXPECT_EQ(moved->offload(0), 0) << "nothing is left to move";
  for (size_t i = 0; i < weights.size(); ++i) EXPECT_EQ(moved->parameters()[i].data_ptr(), weights[i]);
  EXPECT_EQ(moved->reload(0), 4 * 16 * 4);
  EXPECT_TRUE(at::equal(out.activation(), plain->forward(1, x).activation()));
  moved->backward(0, dy);
  const std::vector<at::Tensor> a = gradients(*plain), b = gradients(*moved);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << "parameter " << i;
}

TEST(OffloadStage, NamedBlocksMoveWhatOnlyTheirSavedTensorsHold) {
  // The ReLU's output is saved by the ReLU and by the second Linear: it moves when both
  // blocks pack, and stays when one of them keeps it as stock autograd does.
  const at::Tensor x = at::randn({4, 8}), dy = at::randn({4, 8});
  auto plain = first_stage();
  plain->forward(0, x);
  plain->backward(0, dy);
  ForwardOptions options;
  options.offloadable = true;
  for (const auto& [blocks, bytes] : std::vector<std::pair<std::vector<std::string>, int64_t>>{
           {{"relu", "l2"}, 4 * 16 * 4}, {{"l2"}, 0}, {{"relu"}, 0}, {{"l1"}, 0}}) {
    const std::string named = fmt::format("{}", fmt::join(blocks, ","));
    auto stage = first_stage(blocks);
    stage->forward(0, x, options);
    EXPECT_EQ(stage->offload(0), bytes) << named;
    stage->reload(0);
    stage->backward(0, dy);
    const std::vector<at::Tensor> a = gradients(*plain), b = gradients(*stage);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << named << " parameter " << i;
  }
  // A block the model lacks is refused at its entry.
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kEverySchemeMlp);
  const auto [rc, out] = testing::pipelab(fmt::format(
      "run {} --set run.output={} --set 'scheme={{type: pipedream_flush, chunks: 4}}' "
      "--set 'partition.offload={{stages: [0], blocks: [layer9]}}'",
      dir.file("e.yaml"),
      dir.file("run")));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("partition.offload.blocks[0]: model mlp has no block 'layer9'"), std::string::npos) << out;
}

TEST(OffloadStage, ABackwardBeforeItsReloadFailsAndAForwardWithoutPackingMovesNothing) {
  auto stage = first_stage();
  ForwardOptions options;
  options.offloadable = true;
  stage->forward(0, at::randn({4, 8}), options);
  ASSERT_GT(stage->offload(0), 0);
  try {
    stage->backward(0, at::randn({4, 8}));
    FAIL() << "a backward read activations still on the host";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("its RELOAD has not run"), std::string::npos) << e.what();
  }
  // A forward that was not asked to keep its tensors movable saves them as LibTorch does.
  stage->forward(1, at::randn({4, 8}));
  EXPECT_EQ(stage->offload(1), 0);
}

const char* const kOffload = "partition.offload={stages: always, fraction: 1, prefetch: 1}";

Numerics numerics_of(const std::string& scheme) {
  return Registry<Scheme>::get()
      .create(ConfigNode(YAML::Load(scheme), std::make_shared<ConfigSource>("case"), "scheme"))
      ->numerics();
}

class OffloadEveryScheme : public ::testing::TestWithParam<testing::SchemeCase> {};

TEST_P(OffloadEveryScheme, TrainsToTheSameBitsInEveryExecutor) {
  const testing::SchemeCase& c = GetParam();
  const std::vector<std::string> common{"scheme=" + c.scheme, fmt::format("partition.stages={}", c.stages)};
  const auto with = [&](const std::string& executor, bool offload) {
    std::vector<std::string> o = common;
    o.push_back("run.executor=" + executor);
    if (offload) o.push_back(kOffload);
    return testing::train(testing::kEverySchemeMlp, o);
  };
  const TensorDict plain = with("sequential", false);
  TensorDict moved;
  const std::string refused = testing::user_error([&] { moved = with("sequential", true); });
  if (!refused.empty()) {
    // Only a scheme whose stages differentiate their forwards themselves (local losses) or
    // whose schedule keeps nothing long enough (one micro-batch in flight: `single`, `naive`,
    // `dp`) is refused, at the key.
    EXPECT_NE(refused.find("partition.offload"), std::string::npos) << refused;
    if (refused.find("no stage offloads anything") == std::string::npos) {
      EXPECT_NE(numerics_of(c.scheme), Numerics::Synchronous) << c.scheme << ": " << refused;
    }
    return;
  }
  EXPECT_TRUE(testing::identical(plain, moved)) << "max difference " << testing::max_difference(plain, moved);
  const TensorDict threaded = with("{type: threaded, intra_op_threads: 1}", true);
  EXPECT_TRUE(testing::identical(plain, threaded)) << "max difference " << testing::max_difference(plain, threaded);
  if (numerics_of(c.scheme) != Numerics::Synchronous || !dist::available()) return;
  // One process per device, against one process, with offload on both (the traffic figures
  // count what OFFLOAD moved, so both sides do).
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kEverySchemeMlp);
  const std::string all = fmt::format("--set 'scheme={}' --set partition.stages={} --set '{}'", c.scheme, c.stages, kOffload);
  const auto [c1, out1] =
      testing::pipelab(fmt::format("run {} --quiet {} --set run.output={}", dir.file("e.yaml"), all, dir.file("one")));
  ASSERT_EQ(c1, 0) << out1;
  auto scheme = Registry<Scheme>::get().create(
      ConfigNode(YAML::Load(c.scheme), std::make_shared<ConfigSource>("case"), "scheme"));
  const std::vector<int> placement = replicated_placement(*scheme, scheme->stages(c.stages), scheme->replicas(1));
  const int processes = *std::max_element(placement.begin(), placement.end()) + 1;
  const auto [c2, out2] = testing::pipelab(
      fmt::format("launch --nproc {} {} {} --set run.output={}", processes, dir.file("e.yaml"), all, dir.file("many")));
  ASSERT_EQ(c2, 0) << out2;
  testing::expect_same_run(dir.file("one"), dir.file("many"));
}

INSTANTIATE_TEST_SUITE_P(Registry, OffloadEveryScheme, ::testing::ValuesIn(testing::scheme_cases()),
                         testing::scheme_case_name);

/// Per device, costs.json's (device_peak_bytes, host_peak_bytes) of a traced 1F1B run.
std::vector<std::pair<double, double>> peaks(const std::string& flags) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kEverySchemeMlp);
  const auto [rc, log] = testing::pipelab(
      fmt::format("run --quiet {} --set run.output={} --set run.executor=sequential --set 'scheme={{type: "
                  "pipedream_flush, chunks: 4}}' --set partition.stages=4 {}",
                  dir.file("e.yaml"), dir.file("run"), flags));
  EXPECT_EQ(rc, 0) << log;
  std::vector<std::pair<double, double>> out;
  const auto costs = nlohmann::json::parse(testing::read_text(dir.file("run/metrics/costs.json")));
  for (const auto& s : costs["stages"]) out.emplace_back(s["device_peak_bytes"].get<double>(), s["host_peak_bytes"].get<double>());
  return out;
}

TEST(OffloadMemory, TheDevicePeakDropsAndTheHostHoldsWhatMoved) {
  const auto kept = peaks("");
  const auto moved = peaks("--set 'partition.offload={stages: [0], fraction: 1, prefetch: 0}'");
  ASSERT_EQ(kept.size(), 4u);
  ASSERT_EQ(moved.size(), 4u);
  // Stage 0 keeps 4 micro-batches in flight under 1F1B at 4 stages; with prefetch 0 each is
  // on the host from its forward to its backward, so at most one is back at a time.
  EXPECT_LT(moved[0].first, 0.8 * kept[0].first);
  EXPECT_GT(moved[0].second, 0);
  for (size_t s = 0; s < 4; ++s) EXPECT_EQ(kept[s].second, 0) << "stage " << s;
  for (size_t s = 1; s < 4; ++s) EXPECT_EQ(moved[s].second, 0) << "stage " << s;
}

}  // namespace
}  // namespace pipelab::offload_test
