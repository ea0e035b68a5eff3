// Time to accuracy (docs/time-to-accuracy.md): the time to each run.targets value by hand
// (interpolated between evaluations), the run's simulated clock against `pipelab simulate`
// of the same file (one plan, many readers), the files' columns, speed-up tables over a
// baseline cell, and curves against simulated time.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/experiment/targets.h"
#include "core/records/run_record.h"
#include "tests/support/helpers.h"
#include "tools/report/csv.h"
#include "tools/report/curves.h"
#include "tools/report/speedup.h"
#include "tools/report/table.h"
#include "tools/simulate/cost_validation.h"

namespace pipelab::time_to_target_test {
namespace {

std::pair<int, std::string> pipelab(const std::string& args) {
  return testing::shell(std::string(PIPELAB_BINARY) + " " + args);
}

EpochMetrics epoch(int n, double acc, double loss, double train_s, double simulated_s) {
  EpochMetrics m;
  m.epoch = n;
  m.test_acc = acc;
  m.test_loss = loss;
  m.train_seconds = train_s;
  m.simulated_seconds = simulated_s;
  return m;
}

TEST(TimeToTarget, InterpolatedBetweenEvaluationsByHand) {
  // Accuracy 60, 80, 90 after epochs of 10, 12 and 14 s (simulated 1, 1, 1 s). 85 is crossed
  // halfway through epoch 3: 10 + 12 + 0.5 x 14 = 29 s, simulated 2.5 s. Loss 1.0, 0.5,
  // 0.4: 0.8 is crossed 0.4 of the way through epoch 2: 10 + 0.4 x 12 = 14.8 s, 1.4 s.
  const std::vector<EpochMetrics> h{epoch(1, 60, 1.0, 10, 1), epoch(2, 80, 0.5, 12, 1), epoch(3, 90, 0.4, 14, 1)};
  TargetOptions t;
  t.test_acc = 85;
  t.test_loss = 0.8;
  t.train_acc = 99;  // never
  const std::vector<TargetReached> r = time_to_targets(t, h);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].metric, "test_acc");
  EXPECT_TRUE(r[0].reached && r[0].interpolated);
  EXPECT_EQ(r[0].epoch, 3);
  EXPECT_DOUBLE_EQ(r[0].train_seconds, 29);
  EXPECT_DOUBLE_EQ(r[0].simulated_seconds, 2.5);
  EXPECT_EQ(r[1].metric, "train_acc");
  EXPECT_FALSE(r[1].reached);
  EXPECT_TRUE(std::isnan(r[1].train_seconds));
  EXPECT_EQ(r[2].metric, "test_loss");
  EXPECT_FALSE(r[2].at_least);
  EXPECT_EQ(r[2].epoch, 2);
  EXPECT_DOUBLE_EQ(r[2].train_seconds, 14.8);
  EXPECT_DOUBLE_EQ(r[2].simulated_seconds, 1.4);
  // Reached at the first evaluation: its whole epoch, an upper bound, and said so.
  t = {};
  t.test_acc = 50;
  const TargetReached first = time_to_targets(t, h).at(0);
  EXPECT_DOUBLE_EQ(first.train_seconds, 10);
  EXPECT_FALSE(first.interpolated);
  EXPECT_NE(describe(first, 3).find("upper bound"), std::string::npos) << describe(first, 3);
  EXPECT_NE(describe(r[1], 3).find("not reached in 3 epochs"), std::string::npos);
}

TEST(TimeToTarget, TargetsAreCheckedWhereTheyAreWritten) {
  const std::string base =
      "model: {type: mlp, sizes: [8, 4]}\ndataset: {type: synthetic, samples: 64, shape: [8], "
      "classes: 4}\nscheme: {type: single}\noptimizer: {type: sgd, lr: 0.1}\n";
  // Accuracies are in percent, as epochs.csv writes them: 0.9 would be 0.9%.
  std::string e = testing::user_error(
      [&] { testing::experiment(base + "run: {epochs: 1, batch_size: 8, targets: {test_acc: 0.9}}\n"); });
  EXPECT_NE(e.find("run.targets.test_acc"), std::string::npos) << e;
  EXPECT_NE(e.find("write 90 for 90%"), std::string::npos) << e;
  e = testing::user_error(
      [&] { testing::experiment(base + "run: {epochs: 1, batch_size: 8, targets: {accuracy: 90}}\n"); });
  EXPECT_NE(e.find("accuracy"), std::string::npos) << e;
  EXPECT_NE(e.find("test_acc"), std::string::npos) << e;  // the keys it knows
  e = testing::user_error(
      [&] { testing::experiment(base + "run: {epochs: 1, batch_size: 8, targets: {test_loss: -1}}\n"); });
  EXPECT_NE(e.find("run.targets.test_loss"), std::string::npos) << e;
}

/// A 2-stage GPipe of a small MLP, 4 steps an epoch, evaluated every epoch.
constexpr const char* kRun =
    "model: {type: mlp, sizes: [8, 16, 16, 4]}\n"
    "dataset: {type: synthetic, samples: 64, test_samples: 32, shape: [8], classes: 4}\n"
    "partition: {stages: 2}\nscheme: {type: gpipe, chunks: 2}\n"
    "optimizer: {type: sgd, lr: 0.1}\n"
    "run: {epochs: 3, batch_size: 16, progress: false, targets: {test_acc: 10, test_loss: 0.0001}}\n";

TEST(TimeToTarget, ARunRecordsTheSimulatedStepOfItsOwnPlan) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kRun);
  const auto [code, out] = pipelab(
      fmt::format("run {} --set run.output={} --cluster h100_sxm --quiet", dir.file("e.yaml"), dir.file("run")));
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json s = nlohmann::json::parse(testing::read_text(dir.file("run/summary.json")));
  const double step = s["simulated"]["step_seconds"].get<double>();
  EXPECT_EQ(s["simulated"]["devices"].get<int>(), 2);
  // Which costs, and what costs of that kind were checked against: a preset's are derived.
  EXPECT_EQ(s["simulated"]["costs"].get<std::string>(), "derived");
  EXPECT_EQ(s["simulated"]["checked"].get<std::string>(), sim::cost_validation(sim::CostKind::Derived));
  // `pipelab simulate` of the same file on the same cluster: the same step (its table shows
  // samples/s rounded to a whole number), under the same costs and the same figure.
  const auto [sim_code, sim_out] = pipelab(fmt::format("simulate {} --cluster h100_sxm", dir.file("e.yaml")));
  ASSERT_EQ(sim_code, 0) << sim_out;
  EXPECT_NE(sim_out.find("\nchecked: " + sim::cost_validation(sim::CostKind::Derived) + "\n"), std::string::npos)
      << sim_out;
  const size_t row = sim_out.find("| gpipe | 2 | 1 x 2 x 1 | 2 | 2 | ");
  ASSERT_NE(row, std::string::npos) << sim_out;
  std::vector<std::string> fields;
  for (size_t a = 1, b; (b = sim_out.find('|', row + a)) < sim_out.find('\n', row); a = b - row + 1) {
    fields.push_back(sim_out.substr(row + a, b - row - a));
  }
  ASSERT_GE(fields.size(), 7u) << sim_out;
  EXPECT_NEAR(16 / step, std::stod(fields[6]), 0.5) << sim_out;
  // steps.csv: step k (from 0) ends at (k + 1) steps; epochs.csv: 4 steps an epoch.
  const auto steps = tools::parse_csv(testing::read_text(dir.file("run/metrics/steps.csv")), "steps.csv");
  ASSERT_EQ(steps.size(), 13u);
  EXPECT_EQ(steps[0].back(), "simulated_time");
  for (size_t k = 1; k < steps.size(); ++k)
    EXPECT_NEAR(std::stod(steps[k].back()), static_cast<double>(k) * step, 1e-12);
  const auto epochs = tools::parse_csv(testing::read_text(dir.file("run/metrics/epochs.csv")), "epochs.csv");
  ASSERT_EQ(epochs.size(), 4u);
  EXPECT_EQ(epochs[0].back(), "simulated_seconds");
  EXPECT_NEAR(std::stod(epochs[2].back()), 4 * step, 1e-12);
  // Targets: 10% accuracy at the first evaluation (12 steps of 3 epochs: 4 steps), the loss never.
  const nlohmann::json& t = s["time_to_target"];
  EXPECT_EQ(t["test_acc"]["status"], "reached");
  EXPECT_EQ(t["test_acc"]["epoch"], 1);
  EXPECT_NEAR(t["test_acc"]["simulated_seconds"].get<double>(), 4 * step, 1e-12);
  EXPECT_EQ(t["test_loss"]["status"], "not reached");
  EXPECT_TRUE(t["test_loss"]["simulated_seconds"].is_null());
  // Without --cluster: the columns are there, empty (null), and summary.json has no clock.
  const auto [plain, plain_out] =
      pipelab(fmt::format("run {} --set run.output={} --quiet", dir.file("e.yaml"), dir.file("plain")));
  ASSERT_EQ(plain, 0) << plain_out;
  EXPECT_NE(testing::read_text(dir.file("plain/metrics/steps.csv")).find(",null\n"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(testing::read_text(dir.file("plain/summary.json"))).contains("simulated"));
  // A cluster that is not there: exit 2 before anything is written.
  const auto [bad, bad_out] =
      pipelab(fmt::format("run {} --set run.output={} --cluster h900 --quiet", dir.file("e.yaml"), dir.file("bad")));
  EXPECT_EQ(bad, 2) << bad_out;
  EXPECT_NE(bad_out.find("--cluster h900"), std::string::npos) << bad_out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad/metrics")));
}

TEST(TimeToTarget, ASweepTimesEveryCellOnTheCluster) {
  testing::TempDir dir;
  testing::write_text(dir.file("s.yaml"), std::string(kRun) + "sweep:\n  output: " + dir.file("runs") +
                                              "\n  grid: {scheme.chunks: [1, 2]}\n");
  const auto [code, out] = pipelab(fmt::format(
      "sweep {} --cluster h100_sxm --link-gbps 100 --input-shape 8 --classes 4", dir.file("s.yaml")));
  ASSERT_EQ(code, 0) << out;
  double one = 0, two = 0;
  for (const auto& [cell, step] : {std::pair{"chunks=1", &one}, std::pair{"chunks=2", &two}}) {
    const auto s = nlohmann::json::parse(testing::read_text(dir.file(std::string("runs/") + cell + "/summary.json")));
    ASSERT_TRUE(s.contains("simulated")) << cell;
    *step = s["simulated"]["step_seconds"].get<double>();
    // Every flag reaches the cell's run, whatever its type.
    const std::string log = testing::read_text(dir.file(std::string("runs/") + cell + "/sweep.log"));
    for (const char* flag : {"--link-gbps 100", "--input-shape 8", "--classes 4"}) {
      EXPECT_NE(log.find(flag), std::string::npos) << flag << "\n" << log;
    }
  }
  EXPECT_NE(one, two);  // each cell's own plan
  // A bad flag fails the sweep before any cell runs.
  const auto [bad, bad_out] = pipelab(fmt::format("sweep {} --cluster h900", dir.file("s.yaml")));
  EXPECT_EQ(bad, 2) << bad_out;
}

/// A run folder for tables: its scheme and stages, a throughput and a time to target.
void fake_run(const std::string& dir, const std::string& scheme, int stages, int seed, double rate, double to_target) {
  std::filesystem::create_directories(dir);
  testing::write_text(dir + "/config.yaml", fmt::format("model: {{type: mlp}}\npartition: {{stages: {}}}\nscheme: "
                                                        "{{type: {}}}\nrun: {{seed: {}, output: {}}}\n",
                                                        stages, scheme, seed, dir));
  const std::string target = to_target > 0
                                 ? fmt::format("{{\"status\": \"reached\", \"simulated_seconds\": {}}}", to_target)
                                 : "{\"status\": \"not reached\", \"simulated_seconds\": null}";
  testing::write_text(dir + "/summary.json", fmt::format("{{\"status\": \"finished\", \"test_acc\": {{\"final\": 90}}, "
                                                         "\"simulated\": {{\"samples_per_second\": {}}}, "
                                                         "\"time_to_target\": {{\"test_acc\": {}}}}}\n",
                                                         rate, target));
}

std::vector<std::string> split(const std::string& conditions) {
  std::vector<std::string> out;
  std::stringstream in(conditions);
  for (std::string c; std::getline(in, c, ',');) out.push_back(c);
  return out;
}

class SpeedupTable : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string r = dir_.path() + "/runs";
    fake_run(r + "/dp2a", "dp", 2, 0, 400, 10);
    fake_run(r + "/dp2b", "dp", 2, 1, 400, 14);  // the baseline: 400 samples/s, 12 s to target
    fake_run(r + "/dp4", "dp", 4, 0, 600, 8);
    fake_run(r + "/gp2a", "gpipe", 2, 0, 240, 24);
    fake_run(r + "/gp2b", "gpipe", 2, 1, 260, 0);  // never reached
    fake_run(r + "/gp4", "gpipe", 4, 0, 420, 6);
  }
  tools::ResultTable table(const std::string& metric, const std::string& baseline) {
    tools::TableOptions o;
    o.cols = tools::parse_keys("scheme,stages", "--cols");
    o.metric = metric;
    o.speedup_vs = split(baseline);
    const auto runs = tools::load_runs(dir_.path() + "/runs");
    tools::ResultTable t = tools::build_table(runs, o);
    tools::apply_speedup(t, runs);
    return t;
  }
  testing::TempDir dir_;
};

TEST_F(SpeedupTable, RatesAndTimesOverTheBaselineCellByHand) {
  // A rate: cell / baseline. dp/4 600 / 400 = 1.5; gpipe/2 240 / 400 = 0.6 and 260 / 400 = 0.65.
  tools::ResultTable t = table("simulated.samples_per_second", "scheme=dp,stages=2");
  ASSERT_EQ(t.col_labels, (std::vector<std::string>{"dp/2", "dp/4", "gpipe/2", "gpipe/4"}));
  EXPECT_DOUBLE_EQ(t.cells.at({0, 1}).stats().mean, 1.5);
  EXPECT_DOUBLE_EQ(t.cells.at({0, 2}).stats().mean, 0.625);
  EXPECT_DOUBLE_EQ(t.cells.at({0, 0}).stats().mean, 1.0);
  EXPECT_NE(tools::table_markdown(t).find("**speed-up** (x) of simulated.samples_per_second over scheme=dp,stages=2"),
            std::string::npos);
  // A time: baseline / cell, the baseline the mean of its runs (12 s). gpipe/4 12 / 6 = 2;
  // gpipe/2 12 / 24 = 0.5, with its other seed not reached.
  t = table("time_to_target.test_acc.simulated_seconds", "scheme=dp,stages=2");
  EXPECT_DOUBLE_EQ(t.cells.at({0, 3}).stats().mean, 2.0);
  EXPECT_DOUBLE_EQ(t.cells.at({0, 1}).stats().mean, 1.5);
  EXPECT_EQ(t.cells.at({0, 2}).values, std::vector<double>{0.5});
  EXPECT_EQ(t.cells.at({0, 2}).not_reached, 1);
  EXPECT_NE(tools::table_markdown(t).find("| 0.500, n=1, 1 not reached |"), std::string::npos)
      << tools::table_markdown(t);
}

TEST_F(SpeedupTable, ABaselineThatIsNotOneCellIsRefused) {
  std::string e = testing::user_error([&] { table("simulated.samples_per_second", "scheme=dp"); });
  EXPECT_NE(e.find("matches runs of 2 cells"), std::string::npos) << e;
  e = testing::user_error([&] { table("simulated.samples_per_second", "scheme=pipedream"); });
  EXPECT_NE(e.find("no finished run matches"), std::string::npos) << e;
  e = testing::user_error([&] { table("test_acc", "scheme=dp,stages=2"); });
  EXPECT_NE(e.find("neither"), std::string::npos) << e;
}

TEST(SimulatedTimeCurves, CumulativeSimulatedSecondsAndRunsWithoutThem) {
  testing::TempDir dir;
  const std::string header = "epoch,test_acc,seconds,simulated_seconds\n";
  for (const char* run : {"a", "b"})
    std::filesystem::create_directories(dir.file(std::string("runs/") + run + "/metrics"));
  testing::write_text(dir.file("runs/a/config.yaml"), "model: {type: mlp}\nrun: {seed: 0}\n");
  testing::write_text(dir.file("runs/b/config.yaml"), "model: {type: mlp}\nrun: {seed: 1}\n");
  testing::write_text(dir.file("runs/a/metrics/epochs.csv"), header + "1,50,9,0.5\n2,70,9,0.5\n3,80,9,0.75\n");
  testing::write_text(dir.file("runs/b/metrics/epochs.csv"), header + "1,50,9,null\n");
  tools::CurveOptions o;
  o.x = "simulated_time";
  const tools::LineChart chart = tools::build_curves(tools::load_runs(dir.file("runs")), o);
  ASSERT_EQ(chart.series.size(), 1u);
  EXPECT_EQ(chart.series[0].x, (std::vector<double>{0.5, 1.0, 1.75}));
  EXPECT_EQ(chart.x_label, "training time on the simulated cluster (s)");
  ASSERT_EQ(chart.notes.size(), 1u);
  EXPECT_NE(chart.notes[0].find("--cluster"), std::string::npos) << chart.notes[0];
}

}  // namespace
}  // namespace pipelab::time_to_target_test
