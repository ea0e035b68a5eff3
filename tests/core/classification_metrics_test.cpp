// The Matthews correlation (DataSpec::metric "mcc", GLUE CoLA's): hand-computed values, and a
// CoLA run that reports it, the same in one process and launched as two (the evaluating
// rank's confusion matrices travel to the writer with the losses).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/processes/process_group.h"
#include "core/records/metrics_files.h"
#include "core/run/classification_metrics.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::classification_metrics_test {
namespace {

TEST(Mcc, HandComputedValues) {
  // Binary, rows = targets: TN 5, FP 1, FN 2, TP 4 -> (4*5 - 1*2) / sqrt(5*6*6*7).
  EXPECT_NEAR(matthews_correlation(at::tensor({5, 1, 2, 4}, at::kLong).view({2, 2})), 18 / std::sqrt(1260.0), 1e-12);
  // Three classes (Gorodkin's form; computed by hand with numpy): 0.5281353152436116.
  EXPECT_NEAR(matthews_correlation(at::tensor({5, 1, 0, 2, 4, 1, 0, 3, 6}, at::kLong).view({3, 3})),
              0.5281353152436116, 1e-12);
  EXPECT_NEAR(matthews_correlation(at::tensor({3, 0, 0, 3}, at::kLong).view({2, 2})), 1.0, 1e-12);
  EXPECT_NEAR(matthews_correlation(at::tensor({0, 3, 3, 0}, at::kLong).view({2, 2})), -1.0, 1e-12);
  // Every prediction one class: 0, as scikit-learn's matthews_corrcoef.
  EXPECT_EQ(matthews_correlation(at::tensor({4, 0, 3, 0}, at::kLong).view({2, 2})), 0.0);
}

const char* kCola = R"(
model:     {type: transformer, num_words: 60, d_model: 8, layers: 2, heads: 2, ff: 8, dropout: 0}
dataset:   {type: glue, task: cola, maxlen: 8, path: %s}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 2, batch_size: 4, seed: 1, threads: 1, progress: false}
)";

TEST(Mcc, AColaRunReportsItInOneProcessAndInTwo) {
  testing::TempDir dir;
  std::string train, dev;
  const char* words[] = {"the cat sat", "cat the sat on", "dogs bark", "a dog barks loudly", "they drank the pub"};
  for (int i = 0; i < 24; ++i) train += fmt::format("src\t{}\t\t{}\n", i % 3 == 0 ? 0 : 1, words[i % 5]);
  for (int i = 0; i < 10; ++i) dev += fmt::format("src\t{}\t\t{}\n", i % 2, words[(i + 1) % 5]);
  std::filesystem::create_directories(dir.file("cola"));
  testing::write_text(dir.file("cola/train.tsv"), train);
  testing::write_text(dir.file("cola/dev.tsv"), dev);
  std::string yaml = kCola;
  yaml.replace(yaml.find("%s"), 2, dir.file("cola"));
  testing::write_text(dir.file("e.yaml"), yaml);
  const auto [c1, out1] = testing::pipelab(fmt::format("run {} --set run.output={}", dir.file("e.yaml"), dir.file("one")));
  ASSERT_EQ(c1, 0) << out1;
  EXPECT_NE(out1.find("test MCC"), std::string::npos) << out1;
  const std::string summary = testing::read_text(dir.file("one/summary.json"));
  EXPECT_NE(summary.find("\"test_mcc\""), std::string::npos) << summary;
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  const auto [c2, out2] =
      testing::pipelab(fmt::format("launch --nproc 2 {} --set run.output={}", dir.file("e.yaml"), dir.file("two")));
  ASSERT_EQ(c2, 0) << out2;
  const auto column = [](const std::string& csv) {  // the test_mcc column of epochs.csv
    std::vector<std::string> header, out;
    std::istringstream lines(csv);
    std::string line;
    size_t at = 0;
    for (int row = 0; std::getline(lines, line); ++row) {
      std::vector<std::string> cells;
      std::istringstream in(line);
      for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
      if (row == 0) at = static_cast<size_t>(std::find(cells.begin(), cells.end(), "test_mcc") - cells.begin());
      else if (at < cells.size()) out.push_back(cells[at]);
    }
    return out;
  };
  const auto one = column(testing::read_text(dir.file("one/metrics/epochs.csv")));
  ASSERT_EQ(one.size(), 2u);
  EXPECT_NE(one.back(), "nan");
  EXPECT_EQ(one, column(testing::read_text(dir.file("two/metrics/epochs.csv"))));
}

TEST(Mcc, AnOlderRunsEpochsCsvIsWidenedOnResume) {
  // A run written before test_mcc existed: its header is a prefix of today's.
  const MetricsFile& epochs = metrics_files()[2];
  ASSERT_EQ(epochs.name, "metrics/epochs.csv");
  const std::string old_header = epochs.header.substr(0, epochs.header.rfind(",test_mcc"));
  ASSERT_NE(old_header, epochs.header);
  const std::string row(std::count(old_header.begin(), old_header.end(), ','), ',');
  const std::string text = old_header + "\n1" + row + "\n2" + row.substr(1);  // the second line cut short
  const std::string upgraded = upgrade_metrics_text(text, epochs);
  // test_mcc and every column after it (simulated_seconds), each "nan".
  std::string missing;
  for (auto n = std::count(epochs.header.begin(), epochs.header.end(), ',') - static_cast<long>(row.size()); n > 0; --n) {
    missing += ",nan";
  }
  EXPECT_EQ(missing, ",nan,nan");
  EXPECT_EQ(upgraded, epochs.header + "\n1" + row + missing + "\n2" + row.substr(1));
  EXPECT_EQ(lines_to_keep(upgraded, epochs, 1, "epochs.csv"), 2u);
  EXPECT_EQ(upgrade_metrics_text(upgraded, epochs), upgraded);  // today's file: unchanged
}

}  // namespace
}  // namespace pipelab::classification_metrics_test
