// Compressed boundaries in whole runs: the sequential, threaded and multi-process executors
// give the same bits with compression on, the traffic figures count the codes (docs/schemes.md, "Equivalences" item
// 11's formula), compression changes the training, and a listed boundary that does not exist is a
// clear error.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/processes/process_group.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::compression_run_test {
namespace {

using testing::expect_same_run;
using testing::kExperiment;
using testing::pipelab;

const char* kCompress =
    "--set 'compression={activations: {type: sort_quant, q: 6, s: 2}, gradients: {type: uniform, bits: 8}}'";

/// The last epoch's value of column `name` in a run's metrics/epochs.csv.
double last_epoch(const std::string& run, const std::string& name) {
  std::ifstream in(run + "/metrics/epochs.csv");
  std::string header, line, last;
  std::getline(in, header);
  while (std::getline(in, line)) last = line;
  std::vector<std::string> names, values;
  for (auto* out : {&names, &values}) {
    std::istringstream row(out == &names ? header : last);
    for (std::string cell; std::getline(row, cell, ',');) out->push_back(cell);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return std::stod(values.at(i));
  }
  ADD_FAILURE() << "no column " << name;
  return 0;
}

TEST(CompressionRun, EveryExecutorGivesTheSameBitsAndTheTrafficIsTheCodes) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const auto run = [&](const std::string& how, const std::string& out) {
    const auto [code, text] = pipelab(fmt::format("{} {} {} --set run.output={}", how, dir.file("e.yaml"), kCompress,
                                                  dir.file(out)));
    EXPECT_EQ(code, 0) << text;
  };
  run("run --quiet", "sequential");
  run("run --quiet --set run.executor=threaded", "threaded");
  expect_same_run(dir.file("sequential"), dir.file("threaded"));
  if (dist::available()) {
    run("launch --nproc 2", "processes");
    expect_same_run(dir.file("sequential"), dir.file("processes"));
  }
  // 4 micro-batches of 4 x 24 a step: sort_quant's 1-byte codes + 4 groups x (min, step)
  // float32 forward; uniform's 1-byte codes + (min, step) back.
  EXPECT_EQ(last_epoch(dir.file("sequential"), "bytes_forward_per_step"), 4 * (4 * 24 + 4 * 8));
  EXPECT_EQ(last_epoch(dir.file("sequential"), "bytes_backward_per_step"), 4 * (4 * 24 + 8));
  // And it trains on the decoded values: not the uncompressed run's numbers.
  const auto [code, text] =
      pipelab(fmt::format("run --quiet {} --set run.output={}", dir.file("e.yaml"), dir.file("plain")));
  ASSERT_EQ(code, 0) << text;
  EXPECT_NE(testing::read_text(dir.file("plain/metrics/steps.csv")),
            testing::read_text(dir.file("sequential/metrics/steps.csv")));
  EXPECT_NE(testing::read_text(dir.file("sequential/config.yaml")).find("sort_quant"), std::string::npos);
}

TEST(CompressionRun, ABoundaryThePipelineLacksIsAClearError) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const auto [code, text] = pipelab(fmt::format(
      "run --quiet {} --set 'compression={{activations: {{type: cast}}, boundaries: [3]}}' --set run.output={}",
      dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find("compression.boundaries"), std::string::npos) << text;
  EXPECT_NE(text.find("boundary 3 does not exist in a pipeline of 2 stages"), std::string::npos) << text;
}

}  // namespace
}  // namespace pipelab::compression_run_test
