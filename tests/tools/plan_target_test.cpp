// `pipelab plan --target` (docs/time-to-accuracy.md, "Planning by time to a target"): the
// steps a plan needs come from a proxy run whose numbers are the plan's own (a direct run of
// the same plan reaches the target in the same steps, interpolated by hand), synchronous
// plans that cut the mini-batch alike share one proxy, time to the target is steps x the
// simulated step and ranks the plans, a second plan trains nothing, and bad flags are
// refused with the fix.
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
  /// `batch_norm`: the MLP normalises each layer's batch (its statistics see the micro-batch).
  /// Its target: with batch norm the loss falls faster, and 1.2 is crossed in the second epoch.
  explicit Fixture(bool batch_norm = false) : target(batch_norm ? 1.2 : kTarget) {
    std::string text = kFile;
    if (batch_norm) text.replace(text.find("8]}"), 3, "8], batch_norm: true}");
    testing::write_text(file, text);
  }
  double target;
  /// `pipelab ARGS` with the cache in this test's folder.
  std::pair<int, std::string> pipelab(const std::string& args) const {
    return testing::shell(fmt::format("PIPELAB_CACHE={} {} {}", tmp.file("cache"), PIPELAB_BINARY, args));
  }
  nlohmann::json plan(const std::string& flags, std::string* out = nullptr) const {
    const auto [code, text] = pipelab(fmt::format("plan {} --devices 4 --device-flops 10 --target test_loss={} "
                                                  "--proxy-steps 64 --json {} {}",
                                                  file, target, tmp.file("ranked.json"), flags));
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

/// `pipelab run` of candidate `c` of `plan --json` into folder `run`, cut at the proxies'
/// budget: 64 steps, or the 4 whole epochs of 16 steps that hold them for a scheme that never
/// flushes (PipeDream-2BW), which cannot stop at a step count.
void run_candidate(const Fixture& f, const nlohmann::json& c, const std::string& run) {
  const std::string scheme = c["scheme"].get<std::string>();
  const std::string flags =
      fmt::format("run {} --set 'scheme={}' --set partition.stages={} --set partition.replicas={} --set run.output={} -q",
                  f.file, scheme, c["stages"].get<int>(),
                  scheme.find("replicas") != std::string::npos ? 1 : c["replicas"].get<int>(), run);
  auto [code, out] = f.pipelab(flags + " --set run.max_steps=64");
  if (code == 2 && out.find("never flushes") != std::string::npos) {
    std::tie(code, out) = f.pipelab(flags + " --set run.epochs=4");
  }
  ASSERT_EQ(code, 0) << out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(PlanTarget, SynchronousPlansCutAlikeShareOneProxyWithARunsOwnSteps) {
  // With batch norm, the parts a mini-batch is cut into (replicas x micro-batches) change
  // the updates: a proxy per way of cutting it, each the steps of running its first plan.
  Fixture f(true);
  std::string out;
  const nlohmann::json ranked = f.plan("--top 6", &out);
  EXPECT_NE(out.find("note: without --async every plan is synchronous"), std::string::npos) << out;
  std::map<int, std::vector<nlohmann::json>> by_parts;  // each in rank order
  for (const nlohmann::json& c : ranked) {
    by_parts[c["replicas"].get<int>() * c["micro_batches"].get<int>()].push_back(c);
  }
  ASSERT_GE(by_parts.size(), 2u) << out;
  EXPECT_EQ(count("\n" + out, "\nproxy "), by_parts.size()) << out;
  std::map<int, double> steps;
  for (const auto& [parts, group] : by_parts) {
    SCOPED_TRACE(fmt::format("{} parts", parts));
    // The oracle: the family's first plan run as the file stands (`single` for a whole
    // mini-batch), its crossing interpolated by hand.
    const std::string run = f.tmp.file(fmt::format("parts{}", parts));
    if (parts == 1) {
      ASSERT_EQ(f.pipelab(fmt::format("run {} --set 'scheme={{type: single}}' --set partition.stages=1 --set "
                                      "run.max_steps=64 --set run.output={} -q",
                                      f.file, run)).first, 0);
    } else {
      run_candidate(f, group.front(), run);
    }
    steps[parts] = steps_to(run, f.target);
    ASSERT_TRUE(steps[parts] > 16 && steps[parts] < 32) << steps[parts];  // inside the second epoch
    // Every plan of the family, past the top rows too.
    for (const nlohmann::json& c : group) {
      EXPECT_NEAR(c["steps_to_target"].get<double>(), steps[parts], 1e-9) << c["label"];
      EXPECT_NEAR(c["time_to_target_seconds"].get<double>(), steps[parts] * c["step_seconds"].get<double>(), 1e-15);
    }
  }
  EXPECT_NE(steps.begin()->second, steps.rbegin()->second) << "batch norm sees the parts";
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
    run_candidate(f, c, run);
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
  const size_t table = out.find("| # | scheme | pipelines x devices x stages a device | stale |");
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
  const size_t proxies = count("\n" + second, "\nproxy ");
  EXPECT_GT(proxies, 1u) << second;  // synchronous families and pipedream's
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
