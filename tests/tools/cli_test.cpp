// The pipelab command: --help everywhere, exit code 2 with one clear message for a user's
// mistake, the schedule printer, and the quickstart experiment (shortened) end to end.
#include <gtest/gtest.h>

#include "tests/support/helpers.h"

namespace pipelab::cli_test {
namespace {

std::pair<int, std::string> pipelab(const std::string& args) { return testing::shell(std::string(PIPELAB_BINARY) + " " + args); }

TEST(Cli, HelpEverywhere) {
  for (const char* cmd : {"--help", "run --help", "list --help", "schedule --help"}) {
    const auto [code, out] = pipelab(cmd);
    EXPECT_EQ(code, 0) << cmd << "\n" << out;
    EXPECT_NE(out.find("usage: pipelab"), std::string::npos) << cmd << "\n" << out;
  }
}

TEST(Cli, UserMistakesExitWithTwo) {
  auto [code, out] = pipelab("sceduel");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("unknown command 'sceduel'; valid: schedule"), std::string::npos) << out;
  std::tie(code, out) = pipelab("run");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("'--file' is required"), std::string::npos) << out;
  std::tie(code, out) = pipelab("run /no/such.yaml");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("error: /no/such.yaml: file not found"), std::string::npos) << out;
  testing::TempDir dir;
  testing::write_text(dir.file("bad.yaml"), "model: {type: mlp, sizes: [4, 2]}\nrun: {epochs: 1}\n");
  std::tie(code, out) = pipelab("run " + dir.file("bad.yaml"));
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("missing the 'dataset' section"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one message: " << out;
  std::tie(code, out) = pipelab("schedule --scheme gpip");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("valid: gpipe"), std::string::npos) << out;
}

TEST(Cli, ScheduleAndList) {
  auto [code, out] = pipelab("schedule --scheme gpipe --stages 4 --microbatches 8");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("0F0 0F1 0F2 0F3 0F4 0F5 0F6 0F7 0B7"), std::string::npos) << out;
  EXPECT_NE(out.find("bubble fraction 0.2727"), std::string::npos) << out;
  // From an experiment file (its scheme and stages), with --set on the scheme's options; the
  // legend explains every action letter.
  std::tie(code, out) = pipelab(std::string("schedule ") + PIPELAB_SOURCE_DIR + "/experiments/quickstart.yaml --set scheme.chunks=4");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("{type: gpipe, chunks: 4"), std::string::npos) << out;
  EXPECT_NE(out.find("3F0 3F1 3F2 3F3 3B3 3B2 3B1 3B0 3U"), std::string::npos) << out;
  for (const char* legend : {"F forward", "B backward", "I, W: B split", "H auxiliary head's backward", "U optimizer step"}) {
    EXPECT_NE(out.find(legend), std::string::npos) << legend;
  }
  // docs/interlocking-cpu.md's bubble column: 4 components, 468 mini-batches of an epoch,
  // with the summaries' unit costs (F = 1, a whole B = 1, H = 0.5).
  for (const auto& [mode, bubble] : std::vector<std::pair<std::string, std::string>>{
           {"global", "75.0%"}, {"local", "0.3%"}, {"pairwise", "28.7%"}, {"nwise, distance: 2", "70.6%"}}) {
    std::tie(code, out) = pipelab("schedule --scheme interlocking --set 'scheme={type: interlocking, mode: " + mode +
                                  "}' --stages 4 --microbatches 468 --costs 1,0.5,0.5");
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("(" + bubble + " of device time idle)"), std::string::npos) << mode << ": " << out.substr(out.rfind("makespan"));
  }
  std::tie(code, out) = pipelab("list scheme gpipe");
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("chunks"), std::string::npos) << out;
  std::tie(code, out) = pipelab("list");
  for (const char* name : {"single", "naive", "gpipe", "mlp", "cnn", "synthetic", "tensors", "sgd", "adam", "adamw", "cosine",
                           "sequential"}) {
    EXPECT_NE(out.find(std::string(" ") + name + " "), std::string::npos) << name;
  }
}

TEST(Cli, QuickstartRuns) {
  testing::TempDir dir;
  const auto [code, out] =
      pipelab(std::string("run ") + PIPELAB_SOURCE_DIR + "/experiments/quickstart.yaml --set run.epochs=1 --set dataset.samples=2048 " +
              "--set run.output=" + dir.file("q"));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("test accuracy"), std::string::npos) << out;
  EXPECT_NE(out.find("bubble"), std::string::npos) << out;
  EXPECT_NE(testing::read_text(dir.file("q/summary.json")).find("\"status\": \"finished\""), std::string::npos);
  // Not a terminal: plain progress lines, no carriage returns.
  EXPECT_EQ(out.find('\r'), std::string::npos);
}

}  // namespace
}  // namespace pipelab::cli_test
