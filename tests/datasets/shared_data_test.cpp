// The real datasets in ../shared/data (see its README), when that folder exists: counts,
// first labels, pixel checksums and statistics computed independently (numpy on the
// decompressed files). Each test skips with a message where the data is absent.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>

#include "datasets/io/files.h"
#include "datasets/io/gzip.h"
#include "datasets/io/jpeg.h"
#include "datasets/text/vocabulary.h"
#include "tests/datasets/dataset_test_util.h"

namespace pipelab::shared_data_test {
namespace {

namespace fs = std::filesystem;

const std::string kShared = PIPELAB_SHARED_DATA_DIR;

#define REQUIRE_SHARED(folder)                                         \
  if (!fs::exists(kShared + "/" + (folder)))                           \
  GTEST_SKIP() << kShared << "/" << (folder)                           \
               << " is absent: this test runs only beside the shared " \
                  "copies of the real datasets"

/// The first `n` labels of a split.
std::vector<int64_t> first_labels(const Dataset& d, int64_t n) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  const at::Tensor y = d.get(idx, 0).y;
  return {y.data_ptr<int64_t>(), y.data_ptr<int64_t>() + n};
}

TEST(SharedData, Cifar10) {
  REQUIRE_SHARED("cifar10/cifar-10-batches-bin");
  const auto s = testing::load_dataset("{type: cifar10, augment: false, normalize: false}", kShared);
  EXPECT_TRUE(testing::contains(s.description, "of 5 training files"));
  EXPECT_EQ(s.test->size(), 10000);
  EXPECT_EQ(s.train->size() % 10000, 0);
  EXPECT_EQ(first_labels(*s.train, 8), (std::vector<int64_t>{6, 9, 9, 4, 1, 1, 2, 7}));
  EXPECT_EQ(first_labels(*s.test, 8), (std::vector<int64_t>{3, 8, 8, 0, 6, 6, 1, 6}));
  const at::Tensor test = testing::whole(*s.test).x;
  // Sum of all 30,720,000 test pixel bytes: 3,733,375,634 (numpy).
  EXPECT_EQ(test.mul(255).round().to(at::kLong).sum().item<int64_t>(), 3733375634LL);
  EXPECT_EQ(test[0][0][0][0].item<float>() * 255, 158.0f);
}

TEST(SharedData, MnistAndFashionMnist) {
  REQUIRE_SHARED("mnist");
  if (!gzip_supported()) GTEST_SKIP() << "built without zlib, and the shared copies are .gz";
  struct Expect {
    std::string type, folder;
    std::vector<int64_t> train_labels, test_labels;
    int64_t train_sum;
    double mean, std;
  };
  for (const Expect& e :
       {Expect{"mnist", "mnist", {5, 0, 4, 1, 9, 2, 1, 3}, {7, 2, 1, 0, 4, 1, 4, 9}, 1567298545LL, 0.1307, 0.3081},
        Expect{"fashion_mnist",
               "fashion-mnist",
               {9, 0, 0, 3, 0, 2, 7, 2},
               {9, 2, 1, 1, 6, 1, 4, 6},
               3431114169LL,
               0.2860,
               0.3530}}) {
    if (!fs::exists(kShared + "/" + e.folder)) continue;
    const auto s = testing::load_dataset(fmt::format("{{type: {}, normalize: false}}", e.type), kShared);
    EXPECT_EQ(s.train->size(), 60000);
    EXPECT_EQ(s.test->size(), 10000);
    EXPECT_EQ(first_labels(*s.train, 8), e.train_labels) << e.type;
    EXPECT_EQ(first_labels(*s.test, 8), e.test_labels) << e.type;
    const at::Tensor x = testing::whole(*s.train).x.to(at::kDouble);
    EXPECT_EQ(x.mul(255).round().to(at::kLong).sum().item<int64_t>(), e.train_sum) << e.type;
    // The default normalisation constants are these files' statistics.
    EXPECT_NEAR(x.mean().item<double>(), e.mean, 5e-5) << e.type;
    EXPECT_NEAR(x.std(/*unbiased=*/false).item<double>(), e.std, 5e-5) << e.type;
  }
}

TEST(SharedData, Glue) {
  REQUIRE_SHARED("glue");
  if (!gzip_supported()) GTEST_SKIP() << "built without zlib, and the shared copies are .gz";
  const auto rte = testing::load_dataset("{type: glue, task: rte}", kShared);
  EXPECT_EQ(rte.train->size(), 2490);
  EXPECT_EQ(rte.test->size(), 277);
  // Row 0 of train.tsv is not_entailment, row 1 entailment.
  EXPECT_EQ(first_labels(*rte.train, 2), (std::vector<int64_t>{1, 0}));
  const auto sst = testing::load_dataset("{type: glue, task: sst2}", kShared);
  EXPECT_EQ(sst.train->size(), 67349);
  EXPECT_EQ(sst.test->size(), 872);
  EXPECT_EQ(first_labels(*sst.test, 2), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(testing::whole(*sst.train).y.sum().item<int64_t>(), 37569);  // positive training sentences
}

TEST(SharedData, Imdb) {
  REQUIRE_SHARED("imdb");
  // The shared copy is a tar.gz: use an extracted folder beside it, else extract into a
  // temp folder (about 10 s).
  testing::TempDir tmp;
  std::string dir = kShared + "/imdb/aclImdb";
  if (!fs::is_directory(dir)) {
    const auto [code, out] =
        testing::shell(fmt::format("tar xzf {}/imdb/aclImdb-train-test.tar.gz -C {}", kShared, tmp.path()));
    if (code != 0) GTEST_SKIP() << "could not extract the IMDB archive: " << out;
    dir = tmp.file("aclImdb");
  }
  const auto s = testing::load_dataset(fmt::format("{{type: imdb, path: {}, cache: false}}", dir), "");
  EXPECT_EQ(s.train->size(), 25000);
  EXPECT_EQ(s.test->size(), 25000);
  const Batch train = testing::whole(*s.train);
  EXPECT_EQ(train.y.sum().item<int64_t>(), 12500);
  EXPECT_EQ(train.x.select(1, 0).eq(1).all().item<bool>(), true);  // every review starts with 1
  EXPECT_LT(train.x.max().item<int64_t>(), 10000);
  // keras's imdb_word_index.json ranks the, and, a, of, to, is, br, in, it, i, this; br
  // comes from the <br /> tags, which we drop, so only a few literal "br"s remain.
  Vocabulary vocabulary;
  for (const char* label : {"neg", "pos"}) {
    for (const std::string& f : list_files(dir + "/train/" + label, ".txt")) vocabulary.count(tokenize(read_file(f)));
  }
  vocabulary.finish();
  const std::vector<std::string> top(vocabulary.words().begin(), vocabulary.words().begin() + 10);
  EXPECT_EQ(top, (std::vector<std::string>{"the", "and", "a", "of", "to", "is", "in", "it", "i", "this"}));
  EXPECT_GT(vocabulary.rank("br"), 10000);
  // The first negative review (0_3.txt) starts "Story of a man who has unnatural feelings".
  EXPECT_EQ(train.x[0][2].item<int64_t>(), vocabulary.rank("of") + 3);
  EXPECT_EQ(train.x[0][3].item<int64_t>(), vocabulary.rank("a") + 3);
}

TEST(SharedData, TinyImagenet) {
  REQUIRE_SHARED("tiny-imagenet-200");
  if (!jpeg_supported()) GTEST_SKIP() << "built without libjpeg";
  const auto s = testing::load_dataset("{type: tiny_imagenet}", kShared);
  EXPECT_EQ(s.train->size(), 100000);
  EXPECT_EQ(s.test->size(), 10000);
  EXPECT_EQ(s.spec.classes, 200);
  EXPECT_EQ(s.train->get({0, 99999}, 0).x.sizes(), (std::vector<int64_t>{2, 3, 224, 224}));
}

}  // namespace
}  // namespace pipelab::shared_data_test
