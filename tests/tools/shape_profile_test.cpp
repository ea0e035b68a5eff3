// Profiles from shapes (core/model/meta_device.h): every zoo model and the YAML models, run on
// the meta device, give the profile a run on the CPU gives: each block's FLOPs and parameters
// (within 1%), the tensors it sends, and the bytes it keeps for its backward and raises while
// it runs (within 5% of the model's total), without computing a value.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/model/meta_device.h"
#include "core/config/registry.h"
#include "core/optim/optimizer.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"
#include "tools/describe/model_profile.h"
#include "tools/simulate/block_memory.h"

namespace pipelab::shape_profile_test {
namespace {

struct Case {
  std::string name, section;
  DataSpec data;
};

DataSpec flat(int64_t features, int64_t classes) {
  DataSpec d;
  d.input_shape = {features};
  d.classes = classes;
  return d;
}

DataSpec ids(int64_t length, int64_t classes) {
  DataSpec d;
  d.input_shape = {length};
  d.integer_input = true;
  d.classes = classes;
  return d;
}

std::vector<Case> zoo() {
  const DataSpec cifar = testing::images(3, 32, 32, 10);
  return {
      {"mlp", "{type: mlp, sizes: [784, 64, 32, 10]}", flat(784, 10)},
      {"cnn", "{type: cnn}", cifar},
      {"resnet18", "{type: resnet, depth: 18}", cifar},
      {"resnet50", "{type: resnet, depth: 50, stem: imagenet}", testing::images(3, 64, 64, 10)},
      {"vgg16", "{type: vgg16}", cifar},
      {"mobilenet_v2", "{type: mobilenet_v2}", cifar},
      {"densenet121", "{type: densenet121}", cifar},
      {"googlenet", "{type: googlenet}", cifar},
      {"inception_v3", "{type: inception_v3}", testing::images(3, 75, 75, 10)},
      {"amoebanet_d", "{type: amoebanet_d, layers: 3, filters: 16}", cifar},
      {"unet", "{type: unet, depth: 3, channels: 8}", cifar},
      {"transformer", "{type: transformer, d_model: 32, ff: 64, layers: 2}", ids(16, 2)},
      {"transformer_masked", "{type: transformer, d_model: 32, ff: 64, layers: 2, padding_mask: true}", ids(16, 2)},
      {"transformer_lm", "{type: transformer, head: lm, num_words: 50, d_model: 32, ff: 64, layers: 3, "
                         "tie_embeddings: true}", testing::word_windows(50, 16)},
      {"roberta", "{type: roberta, vocab: 60, hidden: 16, layers: 2, heads: 2, intermediate: 32, max_positions: 40}",
       ids(10, 3)},
      {"sequential_vision",
       "{type: sequential, layers: [conv2d: {out: 4, kernel: 3, padding: 1}, batch_norm, relu, "
       "block: [max_pool2d: {kernel: 2}, flatten], residual: [linear: {out: 64}, gelu, layer_norm], "
       "linear: {out: 10}]}",
       testing::images(3, 8, 8, 10)},
      {"sequential_signal",
       "{type: sequential, layers: [conv1d: {out: 8, kernel: 3}, group_norm: {groups: 2}, silu, "
       "avg_pool1d: {kernel: 2}, leaky_relu: {slope: 0.1}, adaptive_avg_pool1d: {out: [4]}, flatten, "
       "dropout: {p: 0.3}, linear: {out: 5}, tanh, linear: {out: 3}, sigmoid]}",
       [] {
         DataSpec d;
         d.input_shape = {4, 16};
         d.classes = 3;
         return d;
       }()},
  };
}

double sum(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x;
  return s;
}

double rise_sum(const std::vector<sim::Affine>& v, double examples) {
  double s = 0;
  for (const sim::Affine& a : v) s += a.at(examples);
  return s;
}

/// |a - b| within `share` of max(|b|, floor).
void expect_near_share(double meta, double cpu, double share, double floor, const std::string& what) {
  EXPECT_LE(std::abs(meta - cpu), share * std::max(std::abs(cpu), floor)) << what << ": meta " << meta << ", cpu " << cpu;
}

TEST(ShapeProfile, EveryZooModelProfilesOnTheMetaDeviceAsOnTheCpu) {
  const auto sgd = Registry<OptimizerFactory>::get().create(
      ConfigNode(YAML::Load("{type: sgd, lr: 0.1, momentum: 0.9}"), std::make_shared<ConfigSource>("t"), "optimizer"));
  for (const Case& c : zoo()) {
    SCOPED_TRACE(c.name);
    const ModelDef def = testing::define_model(c.section, c.data);
    std::vector<BlockProfile> cpu, meta;
    try {
      cpu = profile_blocks(def, c.data, 0, false);
      meta = profile_blocks(def, c.data, 0, true);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.name << ": " << meta_failure(e);
      continue;
    }
    ASSERT_EQ(cpu.size(), meta.size());
    for (size_t b = 0; b < cpu.size(); ++b) {
      EXPECT_EQ(meta[b].parameters, cpu[b].parameters) << cpu[b].name;
      expect_near_share(static_cast<double>(meta[b].flops), static_cast<double>(cpu[b].flops), 0.01, 1, cpu[b].name);
      expect_near_share(static_cast<double>(meta[b].weight_flops), static_cast<double>(cpu[b].weight_flops), 0.01, 1,
                        cpu[b].name + " (weights' FLOPs)");
      EXPECT_LE(cpu[b].weight_flops, cpu[b].flops) << cpu[b].name;
      EXPECT_EQ(meta[b].output_shape, cpu[b].output_shape) << cpu[b].name;
      ASSERT_EQ(meta[b].live.size(), cpu[b].live.size()) << cpu[b].name;
      for (size_t k = 0; k < cpu[b].live.size(); ++k) EXPECT_EQ(meta[b].live[k].bytes, cpu[b].live[k].bytes);
    }
    sim::BlockMemory mc, mm;
    try {
      mc = sim::measure_block_memory(def, c.data, 0, sgd.get(), 2, false);
      mm = sim::measure_block_memory(def, c.data, 0, sgd.get(), 2, true);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.name << " memory: " << meta_failure(e);
      continue;
    }
    const double kept = sum(mc.retained_per_example);
    expect_near_share(sum(mm.retained_per_example), kept, 0.05, 1, "kept bytes per example");
    // The meta device counts the operators' outputs, not the CPU kernels' own workspaces
    // (oneDNN's convolution reorders and im2col buffers): a lower bound there, and the same
    // bytes where no kernel keeps a workspace.
    const bool workspaces = c.name != "mlp" && c.name.rfind("transformer", 0) != 0 && c.name != "roberta";
    for (const double examples : {2.0, 32.0}) {
      for (const auto& [what, meta_rises, cpu_rises] :
           {std::tuple{"forward", &mm.forward_rise, &mc.forward_rise}, {"backward", &mm.backward_rise, &mc.backward_rise}}) {
        const double m = rise_sum(*meta_rises, examples), cpu = rise_sum(*cpu_rises, examples);
        if (workspaces) {
          EXPECT_LE(m, cpu * 1.05) << what << " rises at " << examples;
        } else {
          expect_near_share(m, cpu, 0.05, kept * examples, fmt::format("{} rises at {}", what, examples));
        }
      }
    }
    // An optimizer step's temporaries are tensors as large as a parameter; a few scalars' bytes aside.
    EXPECT_NEAR(sum(mm.update_rise), sum(mc.update_rise), std::max(0.05 * sum(mc.update_rise), 1024.0)) << "update rises";
    fmt::print("{:<20} kept/example cpu {:>10.0f} meta {:>10.0f}\n", c.name, kept, sum(mm.retained_per_example));
  }
}

// The FLOPs of operators that read a weight, apart (what a split backward's W computes again):
// all of an MLP's; all of a transformer layer's but attention's two products of activations,
// Q K^T and the scores times V, 2 x L x L x d multiply-adds an example (L positions, width d).
TEST(ShapeProfile, TheWeightsFlopsAreThoseOfOperatorsThatReadAWeight) {
  const DataSpec flat_data = flat(784, 10);
  const std::vector<BlockProfile> mlp =
      profile_blocks(testing::define_model("{type: mlp, sizes: [784, 64, 10]}", flat_data), flat_data, 0, true);
  for (const BlockProfile& b : mlp) EXPECT_EQ(b.weight_flops, b.flops) << b.name;
  const int64_t length = 16, width = 32;
  const DataSpec words = ids(length, 2);
  const std::vector<BlockProfile> transformer = profile_blocks(
      testing::define_model("{type: transformer, d_model: 32, ff: 64, layers: 2}", words), words, 0, true);
  int layers = 0;
  for (const BlockProfile& b : transformer) {
    if (b.name.rfind("layer", 0) != 0) continue;
    ++layers;
    EXPECT_EQ(b.flops - b.weight_flops, 2 * 2 * length * length * width) << b.name;
  }
  EXPECT_EQ(layers, 2);
}

TEST(ShapeProfile, AFusedRecurrentLayerIsRefusedByName) {
  // Its kernels keep a workspace its meta decomposition does not (half the bytes): refused,
  // so the planner measures instead.
  const std::vector<Case> rnns = {
      {"residual_lstm", "{type: residual_lstm}", ids(12, 5)},
      {"sequential_text",
       "{type: sequential, layers: [embedding: {num: 20, dim: 8}, transformer_encoder_layer: {heads: 2, ff: 16}, "
       "lstm: {hidden: 8}, gru: {hidden: 6, layers: 2, bidirectional: true}, attention: {heads: 2}, flatten, "
       "linear: {out: 3}]}",
       ids(7, 3)}};
  for (const Case& c : rnns) {
    const ModelDef def = testing::define_model(c.section, c.data);
    try {
      profile_blocks(def, c.data, 0, true);
      ADD_FAILURE() << c.name << " was profiled from shapes";
    } catch (const MetaUnsupported& e) {
      EXPECT_NE(meta_failure(e).find("aten::lstm"), std::string::npos) << meta_failure(e);
    }
  }
}

}  // namespace
}  // namespace pipelab::shape_profile_test
