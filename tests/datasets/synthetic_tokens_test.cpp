// `synthetic` with `tokens`: a language-model task of any size, deterministic, whose targets
// are the windows shifted by one word; a bad token section names its key.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/config/registry.h"
#include "core/data/dataset.h"
#include "tests/support/helpers.h"

namespace pipelab::synthetic_tokens_test {
namespace {

DatasetSplits load(const std::string& yaml) {
  const auto factory = Registry<DatasetFactory>::get().create(
      ConfigNode(YAML::Load(yaml), std::make_shared<ConfigSource>("t.yaml"), "dataset"));
  return factory->load(DataContext{});
}

TEST(SyntheticTokens, WindowsOfWordIdsWithTheNextWordAsTarget) {
  const std::string yaml = "{type: synthetic, samples: 6, test_samples: 2, tokens: {vocabulary: 50, length: 9}}";
  const DatasetSplits d = load(yaml);
  EXPECT_EQ(d.spec.input_shape, std::vector<int64_t>{9});
  EXPECT_EQ(d.spec.target_shape, std::vector<int64_t>{9});
  EXPECT_TRUE(d.spec.integer_input);
  EXPECT_EQ(d.spec.classes, 50);
  ASSERT_EQ(d.train->size(), 6);
  ASSERT_EQ(d.test->size(), 2);
  const Batch b = d.train->get({0, 1, 2, 3, 4, 5}, 0);
  EXPECT_EQ(b.x.scalar_type(), at::kLong);
  EXPECT_GE(b.x.min().item<int64_t>(), 0);
  EXPECT_LT(b.x.max().item<int64_t>(), 50);
  // Target t is word t + 1 of the same chain.
  EXPECT_TRUE(at::equal(b.y.narrow(1, 0, 8), b.x.narrow(1, 1, 8)));
  // Without label noise every word is its predecessor's fixed successor: one successor per word.
  std::map<int64_t, int64_t> successor;
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t t = 0; t < 9; ++t) {
      const auto [it, fresh] = successor.emplace(b.x[i][t].item<int64_t>(), b.y[i][t].item<int64_t>());
      EXPECT_EQ(it->second, b.y[i][t].item<int64_t>());
    }
  }
  EXPECT_TRUE(at::equal(load(yaml).train->get({0, 1, 2, 3, 4, 5}, 0).x, b.x));  // the same bytes again
}

TEST(SyntheticTokens, ABadTokenSectionNamesItsKey) {
  const std::string e = testing::user_error(
      [] { load("{type: synthetic, shape: [4], tokens: {vocabulary: 50, length: 9}}"); });
  EXPECT_NE(e.find("t.yaml:1"), std::string::npos) << e;
  EXPECT_NE(e.find("shape"), std::string::npos) << e;
  EXPECT_NE(testing::user_error([] { load("{type: synthetic, tokens: {vocabulary: 1, length: 9}}"); }).find("vocabulary"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab::synthetic_tokens_test
