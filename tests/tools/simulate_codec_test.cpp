// pipelab simulate with compressed boundaries: costs not measured with compression get the
// codecs' encoded sizes (the formulas of docs/compression.md) and their measured times, only on
// the boundaries the section names; the replay adds the codec time to F and to the backward
// (a timeline by hand); a compressed run's costs.json carries both already.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/config/registry.h"
#include "core/config/yaml_file.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"
#include "tools/simulate/codec_costs.h"
#include "tools/simulate/simulate.h"

namespace pipelab::simulate_codec_test {
namespace {

CompressionSection section(const std::string& yaml) {
  auto source = std::make_shared<ConfigSource>("e.yaml");
  return read_compression(ConfigNode(parse_yaml(yaml, "e.yaml"), source, "compression"));
}

/// `stages` stages, F 1 s and B 2 s, micro-batches of 16 examples of 256 float32 elements.
sim::SimCosts plain(int stages) {
  sim::SimCosts c;
  c.micro_batch_size = 16;
  for (int s = 0; s < stages; ++s) {
    sim::StageCosts k;
    k.seconds[ActionKind::Forward] = 1;
    k.seconds[ActionKind::Backward] = 2;
    k.activation_bytes = s + 1 < stages ? 16 * 256 * 4 : 0;
    k.gradient_bytes = s > 0 ? 16 * 256 * 4 : 0;
    c.stages.push_back(k);
  }
  return c;
}

TEST(SimulateCodecs, EncodedSizesOnTheNamedBoundaries) {
  sim::SimCosts c = plain(4);
  sim::apply_compression(c, section("{activations: {type: sort_quant, q: 6, s: 2}, gradients: {type: uniform, bits: 8}, "
                                    "boundaries: client_server}"),
                         4);
  // Boundaries 0 and 2: SQ8's 1-byte codes + 4 groups x (min, step); uniform's + (min, step).
  EXPECT_EQ(c.stages[0].activation_bytes, 4096 + 32);
  EXPECT_EQ(c.stages[2].activation_bytes, 4096 + 32);
  EXPECT_EQ(c.stages[1].activation_bytes, 16 * 256 * 4);  // boundary 1 travels as it is
  EXPECT_EQ(c.stages[1].gradient_bytes, 4096 + 8);
  EXPECT_EQ(c.stages[3].gradient_bytes, 4096 + 8);
  EXPECT_EQ(c.stages[2].gradient_bytes, 16 * 256 * 4);
  // The sender encodes, the receiver decodes: both spend time; the middle boundary's do not.
  EXPECT_GT(c.stages[0].codec_forward_seconds, 0);
  EXPECT_GT(c.stages[1].codec_forward_seconds, 0);
  EXPECT_GT(c.stages[0].codec_backward_seconds, 0);
  EXPECT_GT(c.stages[3].codec_forward_seconds, 0);
  sim::SimCosts middle = plain(3);
  sim::apply_compression(middle, section("{activations: {type: cast}, gradients: {type: cast}, boundaries: [1]}"), 4);
  EXPECT_EQ(middle.stages[0].codec_forward_seconds, 0);
  EXPECT_EQ(middle.stages[0].codec_backward_seconds, 0);
  EXPECT_EQ(middle.stages[1].activation_bytes, 16 * 256 * 2);
  EXPECT_NE(c.source.find("compressed"), std::string::npos);
  // AQ-SGD past its warm-up: 4-bit packed codes + an fp16 scale per index of the last dimension.
  sim::SimCosts aq = plain(2);
  sim::apply_compression(aq, section("{activations: {type: aq_sgd, bits: 4}}"), 4);
  EXPECT_EQ(aq.stages[0].activation_bytes, 16 * 256 / 2 + 256 * 2);
  // Costs measured with compression are encoded already.
  sim::SimCosts measured = plain(2);
  measured.compression = "{activations: {type: cast}}";
  sim::apply_compression(measured, section("{activations: {type: cast}}"), 4);
  EXPECT_EQ(measured.stages[0].activation_bytes, 16 * 256 * 4);
}

TEST(SimulateCodecs, TheReplayAddsCodecTimeToForwardAndBackward) {
  // GPipe, 2 stages, 2 micro-batches, F 1 + 0.5 of codecs, B 2 + 0.25: d0 F0 [0,1.5] F1
  // [1.5,3]; d1 F0 [1.5,3] F1 [3,4.5] B1 [4.5,6.75] B0 [6.75,9]; d0 B1 [6.75,9] B0 [9,11.25].
  sim::SimCosts c = plain(2);
  for (sim::StageCosts& s : c.stages) {
    s.activation_bytes = s.gradient_bytes = 0;
    s.codec_forward_seconds = 0.5;
    s.codec_backward_seconds = 0.25;
  }
  const auto gpipe = Registry<Scheme>::get().create(
      ConfigNode(YAML::Load("{type: gpipe, chunks: 2, checkpoint: never}"), std::make_shared<ConfigSource>("t"), "scheme"));
  const sim::SimResult r = sim::simulate(*gpipe, 2, 2, 16, c, {});
  EXPECT_DOUBLE_EQ(r.makespan, 11.25);
}

TEST(SimulateCodecs, ACompressedRunsCostsCarryTheCodecs) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kExperiment);
  const auto [code, text] = testing::pipelab(
      fmt::format("run --quiet {} --set 'compression={{activations: {{type: sort_quant}}}}' --set run.output={}",
                  dir.file("e.yaml"), dir.file("run")));
  ASSERT_EQ(code, 0) << text;
  const auto costs = nlohmann::json::parse(testing::read_text(dir.file("run/metrics/costs.json")));
  EXPECT_NE(costs["compression"].get<std::string>().find("sort_quant"), std::string::npos);
  EXPECT_GT(costs["stages"][0]["codec_forward_seconds"].get<double>(), 0);  // encodes
  EXPECT_GT(costs["stages"][1]["codec_forward_seconds"].get<double>(), 0);  // decodes
  EXPECT_EQ(costs["stages"][0]["codec_backward_seconds"].get<double>(), 0);  // gradients travel as they are
  // Micro-batches of 4 examples x 24 floats: SQ8 codes + 4 groups x (min, step).
  EXPECT_EQ(costs["stages"][0]["activation_bytes"].get<double>(), 4 * 24 + 32);
}

}  // namespace
}  // namespace pipelab::simulate_codec_test
