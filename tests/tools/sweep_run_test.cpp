// `pipelab sweep` end to end on a tiny synthetic experiment (each run takes a fraction of a
// second): an interrupted cell resumes and ends with the bytes of an uninterrupted run,
// finished cells are skipped, a stopped sweep loses nothing and a rerun completes it, a
// diverged cell is recorded while the others finish, and result files are never seen
// half-written.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "tests/support/helpers.h"
#include "tools/sweep/plan.h"
#include "tools/sweep/run_status.h"
#include "tools/sweep/subprocess.h"

namespace fs = std::filesystem;

namespace pipelab::tools::sweep_run_test {
namespace {

const char* kTiny = R"(model: {type: mlp, sizes: [8, 16, 3]}
dataset: {type: synthetic, samples: 64, test_samples: 32, shape: [8], classes: 3}
partition: {stages: 2}
scheme: {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.1}
run: {epochs: 3, batch_size: 16}
)";

std::pair<int, std::string> pipelab(const std::string& args) {
  // One intra-op thread everywhere, so runs in and out of the sweep compute identically.
  return testing::shell("OMP_NUM_THREADS=1 " + std::string(PIPELAB_BINARY) + " " + args);
}

/// Writes a sweep file (kTiny plus `sweep`) whose output is <dir>/out; returns its path.
std::string sweep_file(const testing::TempDir& dir, const std::string& sweep) {
  const std::string path = dir.file("grid.yaml");
  testing::write_text(path, std::string(kTiny) + "sweep:\n  output: " + dir.file("out") + "\n" + sweep);
  return path;
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

/// The line of `out` that ends with `id` (a dry run's "  <status>   <id>" line).
std::string status_line(const std::string& out, const std::string& id) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > id.size() && line.compare(line.size() - id.size() - 1, std::string::npos, " " + id) == 0)
      return line;
  }
  return "(no line for " + id + " in:\n" + out + ")";
}

/// Reads every summary.json under `root` while a sweep runs: each one seen must be whole.
class SummaryWatcher {
 public:
  explicit SummaryWatcher(std::string root) : root_(std::move(root)), thread_([this] { watch(); }) {}
  ~SummaryWatcher() { stop(); }
  /// Stops watching; returns how many summaries were read whole (and fails on a partial one).
  int stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    return reads_;
  }

 private:
  void watch() {
    while (!done_) {
      std::error_code ec;
      for (auto it = fs::recursive_directory_iterator(root_, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        if (it->path().filename() != "summary.json") continue;
        const std::string text = testing::read_text(it->path().string());
        if (text.empty()) continue;  // renamed away between listing and reading
        EXPECT_EQ(text.back(), '\n');
        EXPECT_NE(text.find("\"git_revision\""), std::string::npos) << "partial summary: " << text;
        ++reads_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  std::string root_;
  std::atomic<bool> done_{false};
  int reads_ = 0;
  std::thread thread_;
};

TEST(SweepRun, ResumesInterruptedCellsAndSkipsFinishedOnes) {
  testing::TempDir dir;
  const std::string file = sweep_file(dir, "  grid: {run.seed: [0, 1]}\n");
  const SweepPlan plan = plan_sweep(file);
  ASSERT_EQ(plan.runs.size(), 2u);
  const PlannedRun& first = plan.runs[0];
  ASSERT_EQ(first.id, "seed=0");

  // A cell interrupted after one epoch, as a killed sweep would leave it.
  fs::create_directories(first.dir);
  testing::write_text(first.experiment_path(), first.experiment);
  auto [code, out] = pipelab("run " + first.experiment_path() + " --stop-after 1 --quiet");
  ASSERT_EQ(code, 0) << out;
  std::tie(code, out) = pipelab("sweep " + file + " --dry-run");
  EXPECT_EQ(code, 0) << out;
  EXPECT_HAS(status_line(out, "seed=0"), "  interrupted after epoch 1 ");
  EXPECT_HAS(status_line(out, "seed=1"), "  to do ");
  EXPECT_FALSE(fs::exists(plan.runs[1].dir)) << "a dry run writes nothing";

  SummaryWatcher watcher(dir.file("out"));
  std::tie(code, out) = pipelab("sweep " + file + " --jobs 2 --threads 1");
  watcher.stop();
  EXPECT_EQ(code, 0) << out;
  EXPECT_HAS(out, "resume   seed=0  (after epoch 1)");
  EXPECT_HAS(out, "start    seed=1");
  EXPECT_HAS(out, "done     seed=1  test acc ");
  EXPECT_HAS(out, "2 done, 0 skipped (had results), 0 diverged, 0 failed");
  for (const PlannedRun& r : plan.runs) {
    EXPECT_HAS(testing::read_text(r.dir + "/summary.json"), "\"status\": \"finished\"");
    EXPECT_HAS(testing::read_text(r.dir + "/sweep.log"), "pipelab run " + r.experiment_path() + " --resume --quiet");
    EXPECT_HAS(testing::read_text(r.dir + "/config.yaml"), " 1 intra-op threads)");
    EXPECT_HAS(testing::read_text(r.dir + "/config.yaml"), "threads: 1 thread x 1 intra-op thread");
    for (const auto& f : fs::recursive_directory_iterator(r.dir)) {
      EXPECT_EQ(f.path().string().find(".tmp."), std::string::npos) << "left behind: " << f.path();
    }
  }
  // The resumed cell ends with the bytes of an uninterrupted run of the same cell.
  std::tie(code, out) = pipelab("run " + first.experiment_path() + " --set run.output=" + dir.file("ref") + " --quiet");
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(testing::identical(load_tensor_dict(first.dir + "/checkpoints/final.pt"),
                                 load_tensor_dict(dir.file("ref/checkpoints/final.pt"))));
  // Run alone, a cell keeps the title the sweep gives it (its run id), not "experiment".
  EXPECT_HAS(testing::read_text(dir.file("ref/summary.json")), "\"experiment\": \"seed=0\"");

  std::tie(code, out) = pipelab("sweep " + file);
  EXPECT_EQ(code, 0) << out;
  EXPECT_HAS(out, "0 done, 2 skipped (had results)");
  std::tie(code, out) = pipelab("sweep " + file + " --dry-run");
  EXPECT_HAS(status_line(out, "seed=1"), "  done ");
  EXPECT_HAS(out, "2 done");
  // A changed base experiment is not silently skipped.
  std::tie(code, out) = pipelab("sweep " + file + " --set run.epochs=4");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "2 runs hold results of a different version of their cell");
  EXPECT_HAS(out, "Fix: pass --rerun-changed");
}

TEST(SweepRun, StoppedSweepLosesNothingAndARerunCompletesIt) {
  testing::TempDir dir;
  const std::string file = sweep_file(dir, "  grid: {run.seed: [0, 1, 2]}\n");
  ChildProcess sweep({PIPELAB_BINARY, "sweep", file, "--threads", "1"}, {}, dir.file("sweep.log"));
  // Stop it (SIGTERM, as `kill` would) once the first run has its result.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(dir.file("out/seed=0/summary.json")) && std::chrono::steady_clock::now() < deadline &&
         !sweep.poll()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  sweep.terminate();
  const int code = sweep.wait();
  const std::string log = testing::read_text(dir.file("sweep.log"));
  if (code == 0) GTEST_SKIP() << "the sweep ended before it could be stopped:\n" << log;
  EXPECT_EQ(code, 130) << log;
  EXPECT_HAS(log, "stopping: ending ");
  EXPECT_HAS(log, "run the sweep again to complete it");
  EXPECT_HAS(testing::read_text(dir.file("out/seed=0/summary.json")), "\"status\": \"finished\"");

  auto [rc, out] = pipelab("sweep " + file);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_HAS(out, "2 done, 1 skipped (had results)");
  for (const char* id : {"seed=0", "seed=1", "seed=2"})
    EXPECT_TRUE(fs::exists(dir.file("out/") + id + "/checkpoints/final.pt"));
}

TEST(SweepRun, DivergedCellIsRecordedAndTheOthersFinish) {
  testing::TempDir dir;
  const std::string file = sweep_file(dir, "  grid: {optimizer.lr: [0.1, 1.0e+30]}\n");
  auto [code, out] = pipelab("sweep " + file + " --jobs 2 --set run.epochs=2");
  EXPECT_EQ(code, 0) << out;
  EXPECT_HAS(out, "DIVERGED lr=1.0e+30  in epoch 1");
  // Every epoch is shown, however fast the cell: the diverged one's loss as nan, not 0.
  EXPECT_HAS(out, "lr=1.0e+30  train loss nan");
  EXPECT_HAS(out, "lr=0.1  train loss ");
  // Each job's budget is half the cores shared among the jobs, as run.threads: 0 takes.
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_HAS(out, fmt::format("each with OMP_NUM_THREADS={} ", std::max(1, cores / 4)));
  EXPECT_HAS(out, "done     lr=0.1");
  EXPECT_HAS(out, "1 done, 0 skipped (had results), 1 diverged, 0 failed");
  EXPECT_HAS(testing::read_text(dir.file("out/lr=1.0e+30/summary.json")), "\"status\": \"diverged\"");
  // A rerun keeps the diverged result.
  std::tie(code, out) = pipelab("sweep " + file + " --set run.epochs=2 --dry-run");
  EXPECT_HAS(out, "diverged in epoch 1");

  // The table and the plot of the sweep, through the command line.
  std::tie(code, out) = pipelab("table " + dir.file("out") + " --rows model --cols lr");
  EXPECT_EQ(code, 0) << out;
  EXPECT_HAS(out, "| model.type | 0.1 | 1e+30 |");
  EXPECT_HAS(out, "| mlp | ");
  EXPECT_HAS(out, " | diverged |");
  EXPECT_TRUE(fs::exists(dir.file("out.test_acc.final.md")));
  EXPECT_TRUE(fs::exists(dir.file("out.test_acc.final.csv")));
  std::tie(code, out) = pipelab("plot " + dir.file("out") + " --metric test_loss --out " + dir.file("loss.svg"));
  EXPECT_EQ(code, 0) << out;
  EXPECT_HAS(testing::read_text(dir.file("loss.svg")), "<polyline class=\"series\" data-label=\"lr=0.1\"");
}

TEST(SweepRun, ProgressPrintsANonFiniteLossAsNan) {
  // epochs.csv writes NaN and infinities as null (as JSON does); the progress line must not
  // turn them into a loss of 0.
  const EpochProgress p = epoch_progress("epoch,train_loss,train_acc,test_loss,test_acc,seconds", "2,null,10,null,25.5,1.5");
  EXPECT_EQ(p.epoch, "2");
  EXPECT_EQ(p.text, "train loss nan  test acc 25.50%  1.5s");
  EXPECT_EQ(epoch_progress("epoch,train_loss,seconds", "1,0.5,2").text, "train loss 0.5000  test acc nan%  2.0s");
}

TEST(SweepRun, BadCellFailsUpFrontWritingNothing) {
  testing::TempDir dir;
  const std::string file = sweep_file(dir, "  grid: {scheme.chunks: [2, 0]}\n");
  const auto [code, out] = pipelab("sweep " + file);
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "grid.yaml:9:29: scheme.chunks: must be a number > 0, got 0");
  EXPECT_FALSE(fs::exists(dir.file("out")));
  EXPECT_HAS(pipelab("run " + file).second,
             "sweep: a grid of runs. Fix: run it with `pipelab sweep");
}

}  // namespace
}  // namespace pipelab::tools::sweep_run_test
