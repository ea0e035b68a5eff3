// The distributed executor over a real c10d (Gloo) process group. Each rank is a thread
// with its own copy of the stages, exactly as separate processes would hold them; the
// numbers must equal the sequential executor's bit for bit, results reach the rank that
// owns the last stage, and a rank that fails or disappears stops the others with an error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <future>
#include <set>
#include <sstream>

#include "core/processes/process_group.h"
#include "core/exec/distributed.h"
#include "core/util/error.h"
#include "tests/support/helpers.h"
#include "tests/support/linear_pipeline.h"

namespace pipelab::distributed_test {
namespace {

/// Four Linear(6, 6) stages (same initial weights in every copy) under `scheme`.
struct Copy : testing::LinearPipeline {
  explicit Copy(const std::string& scheme_yaml)
      : LinearPipeline(scheme_yaml, "{type: sgd, lr: 0.1, momentum: 0.9}", 4, 6) {}
};

/// Step j's micro-batch mb: 3 examples; input() throws at `fail_at` if set.
class Data : public Feed {
 public:
  explicit Data(int step, int fail_at = -1) : step_(step), fail_at_(fail_at) {}
  at::Tensor input(int mb) override {
    if (mb == fail_at_) throw UserError("micro-batch 1 cannot be read");
    return at::sin(at::arange(18, at::kFloat).reshape({3, 6}) * (1 + mb + 4 * step_));
  }
  at::Tensor target(int mb) override { return at::tensor({mb % 6, (mb + step_) % 6, 2}, at::kLong); }
  double loss_scale(int) override { return 0.25; }
  void on_result(int mb, const MicroBatchResult& r) override {
    std::lock_guard<std::mutex> lock(mutex_);
    losses[mb] = r.loss.item<double>();
  }
  std::map<int, double> losses;

 private:
  int step_, fail_at_;
  std::mutex mutex_;
};

void expect_same_weights(const Stage& a, const Stage& b) {
  const auto pa = const_cast<Stage&>(a).parameters();
  const auto pb = const_cast<Stage&>(b).parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(pa[i].equal(pb[i])) << "stage " << a.index() << " parameter " << i;
}

void distributed_equals_sequential(const std::string& scheme, int world) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  constexpr int kSteps = 3;
  Copy reference(scheme);
  auto sequential = testing::make_executor("{type: sequential}");
  std::vector<std::map<int, double>> reference_losses;
  for (int j = 0; j < kSteps; ++j) {
    Data data(j);
    sequential->run(reference.scheme->schedule(4, 4), reference.slots, data, RunMode::Train);
    reference_losses.push_back(data.losses);
  }
  const int port = dist::free_port();
  std::vector<std::unique_ptr<Copy>> copies;
  for (int p = 0; p < world; ++p) copies.push_back(std::make_unique<Copy>(scheme));
  std::vector<std::future<std::vector<std::map<int, double>>>> ranks;
  for (int p = 0; p < world; ++p) {
    ranks.push_back(std::async(std::launch::async, [&, p] {
      auto e = testing::make_executor(fmt::format("{{type: distributed, rank: {}, world_size: {}, master: '127.0.0.1:{}', "
                                    "timeout_s: 20, intra_op_threads: 1}}",
                                    p, world, port));
      std::vector<std::map<int, double>> losses;
      for (int j = 0; j < kSteps; ++j) {
        Data data(j);
        e->run(copies[static_cast<size_t>(p)]->scheme->schedule(4, 4), copies[static_cast<size_t>(p)]->slots, data,
               RunMode::Train);
        losses.push_back(data.losses);
      }
      return losses;
    }));
  }
  std::vector<std::vector<std::map<int, double>>> losses;
  for (auto& f : ranks) losses.push_back(f.get());
  for (int r = 0; r < 4; ++r) {
    const int owner = ProcessWorld::owner(r, 4, world);
    expect_same_weights(*copies[static_cast<size_t>(owner)]->stages[static_cast<size_t>(r)], *reference.stages[static_cast<size_t>(r)]);
  }
  // Every loss reached the rank with the last stage, bit for bit; the others got none.
  EXPECT_EQ(losses.back(), reference_losses);
  for (int p = 0; p + 1 < world; ++p) EXPECT_TRUE(losses[static_cast<size_t>(p)][0].empty());
}

TEST(DistributedExecutor, GpipeOnFourProcessesEqualsSequential) { distributed_equals_sequential("{type: gpipe, chunks: 4}", 4); }

TEST(DistributedExecutor, PipedreamOnTwoProcessesOfTwoStagesEqualsSequential) {
  distributed_equals_sequential("{type: pipedream}", 2);
}

TEST(DistributedExecutor, StagesAreSplitIntoConsecutiveGroups) {
  EXPECT_EQ(ProcessWorld::owner(0, 4, 2), 0);
  EXPECT_EQ(ProcessWorld::owner(1, 4, 2), 0);
  EXPECT_EQ(ProcessWorld::owner(2, 4, 2), 1);
  EXPECT_EQ(ProcessWorld::owner(3, 4, 2), 1);
  EXPECT_EQ(ProcessWorld::owner(2, 5, 2), 1);  // [0, 2) and [2, 5)
  EXPECT_EQ(ProcessWorld::owner(1, 5, 2), 0);
  EXPECT_EQ(ProcessWorld::owner(4, 4, 4), 3);
}

TEST(DistributedExecutor, AFailingRankStopsThePeersWithAnErrorNamingIt) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  const int port = dist::free_port();
  Copy c0("{type: gpipe, chunks: 4}"), c1("{type: gpipe, chunks: 4}");
  const auto start = std::chrono::steady_clock::now();
  auto rank = [&](int p, Copy& c, int fail_at) {
    return std::async(std::launch::async, [&, p, fail_at]() -> std::string {
      try {
        auto e = testing::make_executor(fmt::format("{{type: distributed, rank: {}, world_size: 2, master: '127.0.0.1:{}', timeout_s: 10}}", p, port));
        Data data(0, fail_at);
        e->run(c.scheme->schedule(4, 4), c.slots, data, RunMode::Train);
        return "no error";
      } catch (const std::exception& e) {
        return e.what();
      }
    });
  };
  // Rank 0 (stages 0-1) fails reading micro-batch 1 and leaves; rank 1 waits for it.
  auto r0 = rank(0, c0, 1);
  auto r1 = rank(1, c1, -1);
  EXPECT_EQ(r0.get(), "micro-batch 1 cannot be read");
  const std::string peer = r1.get();
  EXPECT_NE(peer.find("rank 1 lost rank 0"), std::string::npos) << peer;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 15.0);
}

TEST(DistributedExecutor, ARankThatNeverJoinsIsAnErrorAfterTheTimeout) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  dist::GroupOptions o;
  o.rank = 0;
  o.world_size = 2;
  o.master.port = dist::free_port();
  o.timeout_seconds = 1;
  const std::string message = testing::user_error([&] { dist::ProcessGroup group(o); });
  EXPECT_NE(message.find("rank 0 of 2 could not join the process group at 127.0.0.1:"), std::string::npos) << message;
}

TEST(DistributedExecutor, TwoProcessesTraceMergesOntoTheWritersClock) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  // Two Runners, one per rank (as `pipelab launch` starts them), on threads of this process.
  const char* yaml = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 4}
partition: {stages: 2, balance: [2, 2]}
scheme:    {type: gpipe, chunks: 4}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 1, batch_size: 16, seed: 1, threads: 1}
)";
  testing::TempDir dir;
  const int port = dist::free_port();
  std::vector<std::future<void>> ranks;
  for (int p = 0; p < 2; ++p) {
    ranks.push_back(std::async(std::launch::async, [&, p] {
      Experiment e = testing::experiment(
          yaml, dir.file("run"),
          {fmt::format("run.executor={{type: distributed, rank: {}, world_size: 2, master: '127.0.0.1:{}', "
                       "timeout_s: 60, intra_op_threads: 1}}",
                       p, port)});
      RunnerOptions options;
      options.quiet = true;
      Runner(e, options).run();
    }));
  }
  for (auto& r : ranks) r.get();
  // Rank 1 (the last stage) writes; stage 0's actions came from rank 0.
  const nlohmann::json trace = nlohmann::json::parse(testing::read_text(dir.file("run/trace.json")));
  std::map<std::string, std::vector<std::pair<double, double>>> slices;  // name -> (start, end) in us
  std::set<int> tracks;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double ts = e["ts"].get<double>();
    slices[e["name"].get<std::string>()].push_back({ts, ts + e["dur"].get<double>()});
    tracks.insert(e["tid"].get<int>());
  }
  EXPECT_EQ(tracks, (std::set<int>{0, 1}));
  // The merge is exact to within the barrier's skew, which a loaded machine stretches: 5 ms
  // was once exceeded by 46 us under the full suite on 2 cores. A test must pass on a busy
  // machine, so the bound has room to spare.
  constexpr double kToleranceUs = 20000;
  for (int j = 0; j < 4; ++j) {
    const auto& first = slices[fmt::format("0F{}", j)];
    const auto& second = slices[fmt::format("1F{}", j)];
    ASSERT_EQ(first.size(), 4u) << j;  // one per mini-batch
    ASSERT_EQ(second.size(), first.size()) << j;
    // The n-th F of micro-batch j on stage 1 consumes the n-th one's activation of stage 0.
    for (size_t n = 0; n < first.size(); ++n) EXPECT_GE(second[n].first, first[n].second - kToleranceUs) << j << " " << n;
  }
  std::istringstream csv(testing::read_text(dir.file("run/metrics/actions.csv")));
  std::map<std::string, int> rows;  // stage -> lines
  std::string line;
  std::getline(csv, line);
  while (std::getline(csv, line)) ++rows[line.substr(line.find(',') + 1, 1)];
  EXPECT_EQ(rows["0"], 4 * 9);
  EXPECT_EQ(rows["1"], 4 * 9);
  // Stage 0's memory and optimizer state were measured on rank 0.
  const nlohmann::json costs = nlohmann::json::parse(testing::read_text(dir.file("run/metrics/costs.json")));
  for (const auto& s : costs["stages"]) {
    EXPECT_GT(s["retained_bytes"].get<int64_t>(), 0) << s.dump();
    EXPECT_GT(s["peak_activation_bytes"].get<int64_t>(), 0) << s.dump();
    // Each device's peak came from the process that owns it (one stage per device here).
    EXPECT_EQ(s["device_peak_bytes"], s["peak_activation_bytes"]) << s.dump();
    EXPECT_EQ(s["optimizer_bytes"], s["parameter_bytes"]) << s.dump();
  }
}

}  // namespace
}  // namespace pipelab::distributed_test
