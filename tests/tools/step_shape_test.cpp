// What one step is (core/plan/step_shape.h), read alike by every command: for every
// registered scheme at 2 and 4 stages, `simulate` replays and `plan` ranks the micro-batches
// RunPlan::step says, and the run's own schedule splits and updates as it says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <sstream>

#include "core/config/registry.h"
#include "core/experiment/experiment.h"
#include "core/experiment/plan_request.h"
#include "core/feed/feeds.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::step_shape_test {
namespace {

// Nine blocks: enough for four stages of a V (two per device) and for interleaving. The file's
// scheme has no micro-batches of its own, so `simulate` gives each scheme its own count.
const char* kMlp = R"(
model:     {type: mlp, sizes: [8, 16, 16, 16, 16, 16, 16, 16, 16, 4]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [8], classes: 4}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 16, seed: 0, threads: 1, progress: false}
)";

/// The file with scheme `type` at `stages` stages.
Experiment experiment_of(const std::string& type, int stages) {
  return testing::experiment(kMlp, "", {"scheme={type: " + type + "}", fmt::format("partition.stages={}", stages)});
}

/// Every registered scheme that its type alone makes (a custom schedule names a file).
std::vector<std::string> schemes() {
  std::vector<std::string> out;
  for (const std::string& type : Registry<Scheme>::get().names()) {
    if (testing::user_error([&] { (void)experiment_of(type, 2); }).empty()) {
      out.push_back(type);
    }
  }
  return out;
}

/// Scheme name -> the units column of `simulate`'s table (the rows it simulated).
std::map<std::string, int> simulated_units(const std::string& out) {
  std::map<std::string, int> units;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| ", 0) != 0 || line.find("not simulated") != std::string::npos) continue;
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1));
    std::string cell;
    while (std::getline(row, cell, '|')) cells.push_back(cell.substr(1, cell.size() - 2));
    // The micro-batches column: scheme, devices, topology, stages, micro-batches.
    if (cells.size() > 5 && !cells[4].empty() && std::isdigit(static_cast<unsigned char>(cells[4][0]))) {
      units[cells[0]] = std::stoi(cells[4]);
    }
  }
  return units;
}

RunPlan plan_of(const Experiment& e) { return RunPlan::compile(plan_request(e)); }

/// Updates of stage 0 in `s`.
int updates_of_stage_0(const Schedule& s) {
  int n = 0;
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) n += a.stage == 0 && a.kind == ActionKind::Update;
  }
  return n;
}

TEST(StepShape, SimulateReplaysWhatThePlansStepSays) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kMlp);
  const std::vector<std::string> types = schemes();
  ASSERT_GE(types.size(), 25u);
  for (const int stages : {2, 4}) {
    std::string list;
    for (const std::string& t : types) list += (list.empty() ? "" : ",") + t;
    const auto [code, out] = testing::pipelab(
        fmt::format("simulate {} --schemes {} --stages {} --device-flops 1", dir.file("e.yaml"), list, stages));
    const std::map<std::string, int> units = simulated_units(out);
    int checked = 0;
    for (const std::string& t : types) {
      const auto it = units.find(t);
      if (it == units.end()) continue;  // refused for this model (a row says why)
      const Experiment e = experiment_of(t, stages);
      const StepShape step = plan_of(e).step(e.run.batch_size);
      EXPECT_EQ(it->second, step.replay_micro_batches) << t << " at " << stages << " stages\n" << out;
      ++checked;
    }
    EXPECT_GE(checked, 20) << out;
  }
}

TEST(StepShape, ReplicatedStagesReplayAsDeepAsTheirDevices) {
  // PipeDream's replicated stages deal mini-batches round robin over 3 devices for 2 stages:
  // the steady state is 4 per device of the deepest path, 12, whichever command replays it.
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kMlp);
  const std::vector<std::string> sets{"scheme={type: pipedream}", "partition.replicas=[2, 1]"};
  const Experiment e = testing::experiment(kMlp, "", sets);
  const StepShape step = plan_of(e).step(e.run.batch_size);
  EXPECT_FALSE(step.flushed);
  EXPECT_EQ(step.replay_micro_batches, 12);
  const auto [code, out] = testing::pipelab(fmt::format(
      "simulate {} --set 'scheme={{type: pipedream}}' --set 'partition.replicas=[2, 1]' --device-flops 1",
      dir.file("e.yaml")));
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(simulated_units(out).at("pipedream"), 12) << out;
}

TEST(StepShape, ThePlannerRanksTheReplayThePlansStepSays) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kMlp);
  const auto [code, out] = testing::pipelab(fmt::format(
      "plan {} --devices 4 --device-flops 1 --allow-idle --async --max-staleness 100 --top 1000 --json {}",
      dir.file("e.yaml"), dir.file("ranked.json")));
  ASSERT_EQ(code, 0) << out;
  const auto ranked = nlohmann::json::parse(testing::read_text(dir.file("ranked.json")))["ranked"];
  int checked = 0;
  for (const auto& c : ranked) {
    const Experiment e = testing::experiment(
        kMlp, "", {"scheme=" + c["scheme"].get<std::string>(), fmt::format("partition.stages={}", c["stages"].get<int>()),
                   fmt::format("partition.replicas={}",
                               c["scheme"].get<std::string>().find("replicas") != std::string::npos
                                   ? 1
                                   : c["replicas"].get<int>())});
    const StepShape step = plan_of(e).step(e.run.batch_size, c["micro_batches"].get<int>());
    EXPECT_EQ(c["replayed_micro_batches"].get<int>(), step.replay_micro_batches) << c.dump();
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(StepShape, TheRunSplitsAndUpdatesAsTheStepSays) {
  for (const std::string& t : schemes()) {
    for (const int stages : {2, 4}) {
      SCOPED_TRACE(t + " at " + std::to_string(stages) + " stages");
      const Experiment e = experiment_of(t, stages);
      std::optional<RunPlan> plan;
      if (!testing::user_error([&] { plan = plan_of(e); }).empty()) continue;
      const StepShape step = plan->step(e.run.batch_size);
      if (step.flushed) {
        // One step is one run of the schedule over each replica's micro-batches.
        for (const int u : plan->run_units(e.run.batch_size, 1)) EXPECT_EQ(u, step.micro_batches);
        EXPECT_EQ(step.replay_micro_batches, step.micro_batches);
        EXPECT_NEAR(step.examples_per_micro_batch * step.micro_batches * plan->replicas(), e.run.batch_size, 1e-9);
      } else {
        // A pipeline that runs on: every micro_batches_per_update of its units, one update.
        const int mini_batches = 4 * step.micro_batches_per_update;
        const Schedule s = plan->training(plan->run_units(e.run.batch_size, mini_batches));
        EXPECT_EQ(updates_of_stage_0(s) * step.micro_batches_per_update, mini_batches);
        EXPECT_EQ(step.replay_micro_batches % step.micro_batches_per_update, 0);
        EXPECT_GE(step.replay_micro_batches, 4 * plan->stages());
      }
    }
  }
}

}  // namespace
}  // namespace pipelab::step_shape_test
