// `pipelab plan --target` (docs/time-to-accuracy.md, "Planning by time to a target"): the
// steps a plan needs come from a proxy run whose numbers are the plan's own (a direct run of
// the same plan reaches the target in the same steps, interpolated by hand), every synchronous
// plan shares one proxy, time to the target is steps x the simulated step and ranks the plans,
// a second plan trains nothing, and bad flags are refused with the fix.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <set>

#include "tests/support/helpers.h"
#include "tools/plan/target_report.h"
#include "tools/report/csv.h"

namespace pipelab::plan_target_test {
namespace {

/// 2,048 examples in mini-batches of 128: 16 steps an epoch, evaluated after each.
const char* const kFile = R"(
model:     {type: mlp, sizes: [32, 64, 64, 64, 8]}
dataset:   {type: synthetic, samples: 2048, test_samples: 256, shape: [32], classes: 8}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 4}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 10, batch_size: 128, seed: 0, threads: 1, progress: false}
)";
constexpr double kTarget = 1.9;  // test loss, crossed in the second epoch

struct Fixture {
  testing::TempDir tmp;
  std::string file = tmp.file("exp.yaml");
  Fixture() { testing::write_text(file, kFile); }
  /// `pipelab ARGS` with the cache in this test's folder.
  std::pair<int, std::string> pipelab(const std::string& args) const {
    return testing::shell(fmt::format("PIPELAB_CACHE={} {} {}", tmp.file("cache"), PIPELAB_BINARY, args));
  }
  nlohmann::json plan(const std::string& flags, std::string* out = nullptr) const {
    const auto [code, text] = pipelab(fmt::format("plan {} --devices 4 --device-flops 10 --target test_loss={} "
                                                  "--proxy-steps 64 --json {} {}",
                                                  file, kTarget, tmp.file("ranked.json"), flags));
    EXPECT_EQ(code, 0) << text;
    if (out) *out = text;
    return nlohmann::json::parse(testing::read_text(tmp.file("ranked.json")))["ranked"];
  }
};

/// A run folder's steps to test_loss `target`, by hand: the steps before the epoch that
/// crossed it, plus that epoch's steps x how far between the evaluations the target lies.
double steps_to(const std::string& run, double target) {
  std::map<int, int> steps;  // per epoch, from steps.csv
  const auto step_rows = tools::parse_csv(testing::read_text(run + "/metrics/steps.csv"), "steps.csv");
  for (size_t i = 1; i < step_rows.size(); ++i) ++steps[std::stoi(step_rows[i][1])];
  const auto rows = tools::parse_csv(testing::read_text(run + "/metrics/epochs.csv"), "epochs.csv");
  const auto col = std::find(rows[0].begin(), rows[0].end(), "test_loss") - rows[0].begin();
  double before = 0, last = NAN;
  for (size_t i = 1; i < rows.size(); ++i) {
    const int epoch = std::stoi(rows[i][0]);
    const double v = std::stod(rows[i][col]);
    if (v <= target) return before + steps[epoch] * (std::isnan(last) ? 1.0 : (target - last) / (v - last));
    before += steps[epoch];
    last = v;
  }
  return NAN;
}

TEST(PlanTarget, SynchronousPlansShareOneProxyWithARunsOwnSteps) {
  Fixture f;
  std::string out;
  const nlohmann::json ranked = f.plan("--top 6", &out);
  EXPECT_EQ(out.find("proxy 2/"), std::string::npos) << "one proxy for every synchronous plan:\n" << out;
  EXPECT_NE(out.find("synchronous (single's numbers): test_loss <= 1.9 in "), std::string::npos) << out;
  EXPECT_NE(out.find("the rankings agree"), std::string::npos) << out;
  // The oracle: `single` run as the file stands, its crossing interpolated by hand.
  const auto [code, run_out] = f.pipelab(fmt::format("run {} --set 'scheme={{type: single}}' --set partition.stages=1 "
                                                     "--set run.output={} -q",
                                                     f.file, f.tmp.file("single")));
  ASSERT_EQ(code, 0) << run_out;
  const double expected = steps_to(f.tmp.file("single"), kTarget);
  ASSERT_TRUE(expected > 16 && expected < 32) << expected;  // crossed inside the second epoch
  // Every synchronous plan, past the top rows too: one proxy times them all.
  ASSERT_GT(ranked.size(), 6u);
  for (const nlohmann::json& c : ranked) {
    EXPECT_NEAR(c["steps_to_target"].get<double>(), expected, 1e-9) << c["label"];
    EXPECT_NEAR(c["time_to_target_seconds"].get<double>(), expected * c["step_seconds"].get<double>(), 1e-15);
  }
}

TEST(PlanTarget, AnAsynchronousPlansProxyIsThatPlansRunAndTimeRanksThem) {
  Fixture f;
  std::string out;
  const nlohmann::json ranked = f.plan("--async --schemes pipedream,pipedream_2bw,gpipe --top 4", &out);
  // Each asynchronous plan's steps are those of running it (its stages, its section).
  std::set<double> times;
  for (size_t i = 0; i < 4 && i < ranked.size(); ++i) {
    const nlohmann::json& c = ranked[i];
    SCOPED_TRACE(c["label"].get<std::string>());
    if (c["staleness"].get<int>() == 0) continue;
    const std::string run = f.tmp.file(fmt::format("run{}", i));
    const std::string plan_flags = fmt::format(
        "run {} --set 'scheme={}' --set partition.stages={} --set partition.replicas={} --set run.output={} -q", f.file,
        c["scheme"].get<std::string>(), c["stages"].get<int>(),
        c["scheme"].get<std::string>().find("replicas") != std::string::npos ? 1 : c["replicas"].get<int>(), run);
    // The budget: 64 steps, or the 4 whole epochs of 16 steps that hold them for a scheme
    // that never flushes (PipeDream-2BW), which cannot stop at a step count.
    auto [code, run_out] = f.pipelab(plan_flags + " --set run.max_steps=64");
    if (code == 2 && run_out.find("never flushes") != std::string::npos) {
      std::tie(code, run_out) = f.pipelab(plan_flags + " --set run.epochs=4");
    }
    ASSERT_EQ(code, 0) << run_out;
    EXPECT_NEAR(c["steps_to_target"].get<double>(), steps_to(run, kTarget), 1e-9);
  }
  // Past the top rows, the asynchronous plans are not proxied; the synchronous ones are.
  bool synchronous_past_top = false;
  for (size_t i = 4; i < ranked.size(); ++i) {
    const std::string label = ranked[i]["label"].get<std::string>();
    const bool synchronous = label.rfind("gpipe", 0) == 0 || label.rfind("dp", 0) == 0;
    synchronous_past_top |= synchronous;
    if (synchronous) EXPECT_FALSE(ranked[i]["steps_to_target"].is_null()) << label;
    if (ranked[i]["staleness"].get<int>() > 0) EXPECT_TRUE(ranked[i]["steps_to_target"].is_null()) << label;
  }
  EXPECT_TRUE(synchronous_past_top);
  // The table under "by time to" is in order of time to the target.
  const size_t table = out.find("| # | scheme | stages x replicas | stale |");
  ASSERT_NE(table, std::string::npos) << out;
  double previous = 0;
  for (size_t row = out.find("\n| 1 |", table); row != std::string::npos && out.compare(row, 3, "\n| ") == 0;
       row = out.find('\n', row + 1)) {
    const std::string line = out.substr(row + 1, out.find('\n', row + 1) - row - 1);
    if (line.find("not reached") != std::string::npos) break;
    // The time column: the 7th field.
    std::vector<std::string> fields;
    for (size_t at = 0, next; (next = line.find('|', at + 1)) != std::string::npos; at = next) {
      fields.push_back(line.substr(at + 1, next - at - 1));
    }
    ASSERT_GE(fields.size(), 8u) << line;
    const std::string time = fields[6];
    const double scale = time.find("ms") != std::string::npos ? 1e-3 : time.find("us") != std::string::npos ? 1e-6 : 1;
    const double seconds = std::stod(time) * scale;
    EXPECT_GE(seconds, previous * (1 - 1e-3)) << line;  // 3 significant digits shown
    previous = seconds;
  }
  EXPECT_NE(out.find("best by time to test_loss <= 1.9: "), std::string::npos) << out;
}

TEST(PlanTarget, ASecondPlanTrainsNothing) {
  Fixture f;
  std::string first, second;
  const nlohmann::json a = f.plan("--async --schemes pipedream,gpipe --top 3", &first);
  const nlohmann::json b = f.plan("--async --schemes pipedream,gpipe --top 3", &second);
  EXPECT_EQ(first.find("[cached]"), std::string::npos) << first;
  const auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const size_t proxies = count("\n" + second, "\nproxy ");
  EXPECT_GT(proxies, 1u) << second;  // the synchronous family and pipedream's
  EXPECT_EQ(count(second, "[cached]"), proxies) << second;
  for (size_t i = 0; i < 3 && i < a.size(); ++i) EXPECT_EQ(a[i]["steps_to_target"], b[i]["steps_to_target"]);
}

TEST(PlanTarget, BadFlagsNameTheFix) {
  Fixture f;
  const std::string plan = fmt::format("plan {} --devices 2 --device-flops 10 ", f.file);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--target tst_loss=1", "Fix: one of test_loss"},
      {"--target test_loss", "not METRIC=VALUE"},
      {"--target test_loss=low", "'low' is not a number"},
      {"--target test_acc=0.9", "write 90 for 90%"},
      {"--proxy-steps 10", "--proxy-steps goes with --target"},
      {"--proxy-set dataset.limit=8", "--proxy-set goes with --target"},
      {"--target test_loss=1 --proxy-steps 0", "--proxy-steps"},
  };
  for (const auto& [flags, message] : cases) {
    const auto [code, out] = f.pipelab(plan + flags);
    EXPECT_EQ(code, 2) << flags << "\n" << out;
    EXPECT_NE(out.find(message), std::string::npos) << flags << "\n" << out;
  }
}

TEST(PlanTarget, PlansThatNeverReachTheTargetComeLastInThroughputOrder) {
  // Three plans: #1 reaches it slowly, #2 not at all, #3 fastest. Not proxied: left out.
  std::vector<plan::Candidate> ranked(4);
  const std::vector<double> times{3.0, INFINITY, 1.0, NAN};
  EXPECT_EQ(plan::target_order(ranked, times), (std::vector<size_t>{2, 0, 1}));
}

}  // namespace
}  // namespace pipelab::plan_target_test
