// partition.placement in whole runs: gpipe_test's client_server placement (the first and the
// last stage on one device) trains exactly as the scheme's own placement does, in one process
// and across processes (one per device), with gpipe_test's backward order and compressed
// client boundaries too; `pipelab schedule` draws the placed schedule; a bad placement is a
// clear error naming the key.
#include <gtest/gtest.h>

#include "core/processes/process_group.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::placement_run_test {
namespace {

using testing::expect_same_run;
using testing::pipelab;

const char* kFourStages = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 128, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4}
scheme:    {type: gpipe, chunks: 4}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 1, threads: 1, progress: false}
)";

void ok(const std::string& args) {
  const auto [code, text] = pipelab(args);
  EXPECT_EQ(code, 0) << args << "\n" << text;
}

TEST(PlacementRun, ClientServerTrainsAsTheSchemesOwnPlacement) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kFourStages);
  // gpipe_test's pipeline: its backward order and its compressed client boundaries.
  const std::string gpipe_test = "--set scheme.backward_order=forward --set "
                                 "'compression={activations: {type: sort_quant, q: 6, s: 2}, gradients: {type: "
                                 "sort_quant, q: 6, s: 2}, boundaries: client_server}'";
  for (const std::string& extra : {std::string(), gpipe_test}) {
    const std::string file = dir.file("e.yaml") + " " + extra + " --overwrite";
    ok(fmt::format("run --quiet {} --set run.output={}", file, dir.file("own")));
    ok(fmt::format("run --quiet {} --set partition.placement=client_server --set run.output={}", file,
                   dir.file("client")));
    expect_same_run(dir.file("own"), dir.file("client"));
    ok(fmt::format("run --quiet {} --set partition.placement=client_server --set run.executor=threaded "
                   "--set run.output={}",
                   file, dir.file("client_threads")));
    expect_same_run(dir.file("own"), dir.file("client_threads"));
    if (!dist::available()) continue;
    // Three processes: the client holds stages 0 and 3.
    ok(fmt::format("launch --nproc 3 {} --set partition.placement=client_server --set run.output={}", file,
                   dir.file("client_processes")));
    expect_same_run(dir.file("own"), dir.file("client_processes"));
  }
}

TEST(PlacementRun, TheScheduleCommandDrawsThePlacedSchedule) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kFourStages);
  const auto [code, text] = pipelab(fmt::format("schedule {} --set partition.placement=client_server", dir.file("e.yaml")));
  ASSERT_EQ(code, 0) << text;
  // Three devices; device 0 runs stage 0's and stage 3's actions.
  EXPECT_NE(text.find("3 devices (1 pipeline of 3 devices, up to 2 stages a device, 4 stages a pipeline)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("d0: 0F0 0F1 0F2 0F3 3F0"), std::string::npos) << text;
}

TEST(PlacementRun, ABadPlacementNamesTheKey) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kFourStages);
  for (const std::string& bad : {std::string("'[0, 1, 0]'"), std::string("'[0, 2, 2, 0]'"), std::string("middle")}) {
    const auto [code, text] = pipelab(fmt::format("run --quiet {} --set partition.placement={} --set run.output={}",
                                                  dir.file("e.yaml"), bad, dir.file("bad")));
    EXPECT_EQ(code, 2) << bad << "\n" << text;
    EXPECT_NE(text.find("partition.placement"), std::string::npos) << bad << "\n" << text;
  }
}

}  // namespace
}  // namespace pipelab::placement_run_test
