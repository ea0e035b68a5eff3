// Loaders, micro-batch splitting, and the issue-2 datasets (synthetic, tensors).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/data/loader.h"
#include "core/feed/feeds.h"
#include "tests/support/helpers.h"

namespace pipelab::data_test {
namespace {

DatasetSplits load(const std::string& yaml) {
  auto source = std::make_shared<ConfigSource>("data.yaml");
  return Registry<DatasetFactory>::get().create(ConfigNode(YAML::Load(yaml), source, "dataset"))->load({});
}

TEST(Data, ChunkSemanticsAsTorchgpipe) {
  EXPECT_EQ(chunk_sizes(6, 4), (std::vector<int64_t>{2, 2, 2}));  // fewer than 4 chunks
  EXPECT_EQ(chunk_sizes(10, 4), (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(chunk_sizes(8, 8), (std::vector<int64_t>(8, 1)));
  EXPECT_EQ(chunk_sizes(5, 1), (std::vector<int64_t>{5}));
}

TEST(Data, ChunkFeedScalesLossesToTheMiniBatchMean) {
  const Batch b{at::arange(10, at::kFloat).reshape({10, 1}), at::zeros({10}, at::kLong)};
  ChunkFeed feed(b, 4, at::kDouble);
  ASSERT_EQ(feed.count(), 4);
  EXPECT_DOUBLE_EQ(feed.loss_scale(0), 0.3);
  EXPECT_DOUBLE_EQ(feed.loss_scale(3), 0.1);
  EXPECT_EQ(feed.input(3).scalar_type(), at::kDouble);
  EXPECT_EQ(feed.input(3).item<double>(), 9);
}

TEST(Data, LoaderOrderIsSeededPerEpoch) {
  auto ds = std::make_shared<TensorDataset>(at::arange(10, at::kFloat).reshape({10, 1}), at::arange(10, at::kLong));
  DataLoader a(ds, {3, true, true, 7}), b(ds, {3, true, true, 7});
  EXPECT_EQ(a.batches(), 3);  // the last partial batch is dropped
  const auto order = [](DataLoader& l, int epoch) {
    l.start_epoch(epoch);
    std::vector<int64_t> out;
    for (int64_t j = 0; j < l.batches(); ++j) {
      const at::Tensor y = l.batch(j).y;
      out.insert(out.end(), y.data_ptr<int64_t>(), y.data_ptr<int64_t>() + y.numel());
    }
    return out;
  };
  const auto e1 = order(a, 1);
  order(a, 0);
  EXPECT_EQ(order(a, 1), e1);      // an epoch's order does not depend on what ran before
  EXPECT_EQ(order(b, 1), e1);      // nor on the loader object
  EXPECT_NE(order(a, 2), e1);      // but differs between epochs
  DataLoader eval(ds, {4, false, false, 0});
  EXPECT_EQ(eval.batches(), 3);    // evaluation keeps the last partial batch
  EXPECT_EQ(order(eval, 0), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(Data, SyntheticIsDeterministicAndShaped) {
  const auto a = load("{type: synthetic, samples: 100, test_samples: 20, shape: [1, 4, 4], classes: 5}");
  const auto b = load("{type: synthetic, samples: 100, test_samples: 20, shape: [1, 4, 4], classes: 5}");
  const Batch x = a.train->get({0, 1, 99}, 0), y = b.train->get({0, 1, 99}, 0);
  EXPECT_TRUE(at::equal(x.x, y.x));
  EXPECT_TRUE(at::equal(x.y, y.y));
  EXPECT_EQ(x.x.sizes(), (std::vector<int64_t>{3, 1, 4, 4}));
  EXPECT_EQ(a.test->size(), 20);
  EXPECT_EQ(a.spec.classes, 5);
  const auto c = load("{type: synthetic, samples: 100, test_samples: 20, shape: [16], classes: 5, seed: 1}");
  EXPECT_FALSE(at::equal(c.train->get({0}, 0).x.flatten(), x.x[0].flatten()));
  // Every class occurs: the teacher's argmax is not degenerate.
  const auto many = load("{type: synthetic, samples: 2000, test_samples: 10, classes: 10}");
  std::vector<int64_t> all(2000);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(at::bincount(many.train->get(all, 0).y).gt(50).sum().item<int64_t>(), 10);
}

TEST(Data, TensorsFromPtFiles) {
  testing::TempDir dir;
  c10::impl::GenericDict d(c10::StringType::get(), c10::TensorType::get());
  d.insert("x", at::arange(40, at::kFloat).reshape({10, 4}));
  d.insert("y", at::arange(10, at::kInt).remainder(3));
  d.insert("labels", at::zeros({10}, at::kFloat));
  save_pt(dir.file("d.pt"), d);
  const auto split = load(fmt::format("{{type: tensors, path: {}, test_fraction: 0.3}}", dir.file("d.pt")));
  EXPECT_EQ(split.train->size(), 7);
  EXPECT_EQ(split.test->size(), 3);
  EXPECT_EQ(split.spec.classes, 3);
  EXPECT_EQ(split.spec.input_shape, (std::vector<int64_t>{4}));
  // Train and test are disjoint and together hold every example.
  std::vector<int64_t> seen;
  for (const auto& part : {split.train, split.test}) {
    std::vector<int64_t> idx(static_cast<size_t>(part->size()));
    std::iota(idx.begin(), idx.end(), 0);
    const at::Tensor firsts = part->get(idx, 0).x.select(1, 0);
    for (int64_t i = 0; i < firsts.size(0); ++i) seen.push_back(static_cast<int64_t>(firsts[i].item<float>()) / 4);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));

  const auto error = [&](const std::string& yaml) { return testing::user_error([&] { load(yaml); }); };
  EXPECT_NE(error(fmt::format("{{type: tensors, path: {}, y_key: target}}", dir.file("d.pt"))).find("no tensor 'target'"),
            std::string::npos);
  EXPECT_NE(error(fmt::format("{{type: tensors, path: {}, y_key: labels}}", dir.file("d.pt"))).find("must be integers"),
            std::string::npos);
  EXPECT_NE(error(fmt::format("{{type: tensors, path: {}, classes: 2}}", dir.file("d.pt"))).find("targets go up to 2"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab::data_test
