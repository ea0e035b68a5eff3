// Every expected component is registered (static registration survived linking), and an
// unknown name lists the valid ones, closest first.
#include <gtest/gtest.h>

#include "core/data/dataset.h"
#include "core/exec/executor.h"
#include "core/model/model.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/scheme/scheme.h"
#include "core/util/names.h"
#include "tests/support/helpers.h"

namespace pipelab::registry_test {
namespace {

template <class Base>
void expect_registered(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const auto* entry = Registry<Base>::get().find(name);
    ASSERT_NE(entry, nullptr) << Base::kKind << " '" << name << "' is not registered";
    EXPECT_FALSE(entry->description.empty()) << name;
    // Default options must construct unless a required option exists.
    bool has_required = false;
    for (const FieldInfo& f : entry->options()) has_required |= f.required;
    if (!has_required) EXPECT_NO_THROW(Registry<Base>::get().create_default(name)) << name;
  }
}

TEST(Registry, ExpectedNamesAreRegistered) {
  expect_registered<Scheme>({"single", "naive", "gpipe", "pipedream_flush", "pipedream_2bw", "async", "pipedream",
                             "spectrain", "pipeoptim", "interlocking", "dp", "interleaved_1f1b", "looped_bfs", "zb_h1",
                             "zb_h2", "zbv", "dualpipe_v", "custom", "pipemare", "nesterov_async", "xpipe"});
  expect_registered<Scheme>({"ftpipe", "v_half", "v_min", "chimera", "pipelined_backprop", "dgl"});
  expect_registered<ModelFactory>({"mlp", "cnn", "vgg16", "resnet", "densenet121", "googlenet", "mobilenet_v2",
                                   "inception_v3", "amoebanet_d", "transformer", "residual_lstm"});
  expect_registered<DatasetFactory>(
      {"synthetic", "tensors", "cifar10", "cifar100", "mnist", "fashion_mnist", "imdb", "glue", "tiny_imagenet"});
  expect_registered<OptimizerFactory>({"sgd", "adam", "adamw", "nadam"});
  expect_registered<LrSchedule>({"constant", "step", "multistep", "polynomial", "cosine"});
  expect_registered<Executor>({"sequential", "threaded", "distributed"});
}

TEST(Registry, UnknownNameListsClosestFirst) {
  const std::string msg = testing::user_error([] { Registry<Scheme>::get().at("gpip"); });
  EXPECT_EQ(msg.rfind("unknown scheme 'gpip'; valid: gpipe, ", 0), 0u) << msg;
  EXPECT_EQ(closest_first("adan", {"sgd", "adamw", "adam"}), (std::vector<std::string>{"adam", "adamw", "sgd"}));
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(Registry, CreatedComponentsKnowTheirTypeAndOptions) {
  const auto scheme = Registry<Scheme>::get().create_default("gpipe");
  EXPECT_EQ(scheme->type(), "gpipe");
  const YAML::Node resolved = scheme->resolved();
  EXPECT_EQ(resolved["type"].as<std::string>(), "gpipe");
  EXPECT_EQ(resolved["chunks"].as<int>(), 1);
  EXPECT_EQ(resolved["checkpoint"].as<std::string>(), "except_last");
}

}  // namespace
}  // namespace pipelab::registry_test
