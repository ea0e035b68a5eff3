// Sweep planning without running anything: grid expansion with includes, excludes and
// overrides (the exact cells and ids), map values, stable ids, and every error in a sweep
// section naming file:line:column, the key path and the fix.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/support/helpers.h"
#include "tools/sweep/key_paths.h"
#include "tools/sweep/plan.h"

namespace pipelab::tools::sweep_plan_test {
namespace {

const char* kBase = R"(model: {type: mlp, sizes: [8, 16, 16, 16, 3]}
dataset: {type: synthetic, samples: 64, test_samples: 32, shape: [8], classes: 3}
partition: {stages: 2}
scheme: {type: naive}
optimizer: {type: sgd, lr: 0.1}
run: {epochs: 1, batch_size: 16}
)";

std::vector<std::string> ids(const SweepPlan& p) {
  std::vector<std::string> out;
  for (const PlannedRun& r : p.runs) out.push_back(r.id);
  return out;
}

/// A key of a run's experiment file, as text.
std::string value(const PlannedRun& run, const std::string& key) {
  return value_text(find_path(YAML::Load(run.experiment), key));
}

/// The ConfigError of planning `sweep` (appended to kBase).
std::string error_of(const std::string& sweep) {
  return testing::user_error([&] { plan_sweep_text(std::string(kBase) + sweep, "demo.yaml"); });
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

TEST(SweepPlan, GridIncludeExcludeOverrides) {
  const SweepPlan p = plan_sweep_text(std::string(kBase) + R"(sweep:
  output: out/demo
  grid:
    scheme.type: [naive, gpipe]
    partition.stages: [2, 4]
    run.seed: [0, 1]
  include: [{scheme.type: single, partition.stages: 1}]
  exclude: [{scheme.type: gpipe, partition.stages: 2}]
  overrides:
    - {match: {partition.stages: 4}, set: {optimizer.lr: 0.05}}
)",
                                      "demo.yaml");
  // Grid in file order (first axis slowest), the gpipe x 2 cells left out, then the
  // include entry once per value of the axis it does not name (the seed).
  EXPECT_EQ(ids(p), (std::vector<std::string>{"type=naive,stages=2,seed=0", "type=naive,stages=2,seed=1",
                                              "type=naive,stages=4,seed=0", "type=naive,stages=4,seed=1",
                                              "type=gpipe,stages=4,seed=0", "type=gpipe,stages=4,seed=1",
                                              "type=single,stages=1,seed=0", "type=single,stages=1,seed=1"}));
  EXPECT_EQ(p.output, "out/demo");
  for (const PlannedRun& r : p.runs) {
    EXPECT_EQ(r.dir, "out/demo/" + r.id);
    EXPECT_EQ(value(r, "run.output"), r.dir);
    EXPECT_EQ(value(r, "optimizer.lr"), value(r, "partition.stages") == "4" ? "0.05" : "0.1") << r.id;
    EXPECT_EQ(r.experiment.find("sweep:"), std::string::npos);
    EXPECT_EQ(value(r, "dataset.samples"), "64");  // the base's, untouched by the grid
  }
  EXPECT_EQ(value(p.runs[6], "scheme.type"), "single");
  EXPECT_EQ(value(p.runs[6], "partition.stages"), "1");
  EXPECT_EQ(p.runs[4].labels, (std::vector<Leaf>{{"type", "gpipe"}, {"stages", "4"}, {"seed", "0"}}));
  EXPECT_EQ(p.runs[4].experiment_path(), "out/demo/type=gpipe,stages=4,seed=0/experiment.yaml");
}

TEST(SweepPlan, MapAndListValues) {
  const SweepPlan p = plan_sweep_text(std::string(kBase) + R"(sweep:
  grid:
    scheme: [{type: gpipe, chunks: 4}, {type: naive}]
    partition.balance: [[1, 3], [2, 2]]
)",
                                      "maps.yaml");
  EXPECT_EQ(ids(p), (std::vector<std::string>{"type=gpipe,chunks=4,balance=1-3", "type=gpipe,chunks=4,balance=2-2",
                                              "type=naive,balance=1-3", "type=naive,balance=2-2"}));
  EXPECT_EQ(p.output, "runs/maps");
  EXPECT_EQ(value(p.runs[2], "scheme"), "{type: naive}");  // the whole section replaced
  EXPECT_EQ(value(p.runs[1], "partition.balance"), "2-2");
  // A section read from block YAML is still one line (a table row's label).
  EXPECT_EQ(value_text(YAML::Load("compression:\n  activations:\n    type: cast\n    dtype: bf16\n  boundaries: [0, 2]\n")),
            "{compression: {activations: {type: cast, dtype: bf16}, boundaries: [0, 2]}}");
}

TEST(SweepPlan, IdsAreStableWhenTheGridGrows) {
  const auto plan = [](const std::string& seeds) {
    return plan_sweep_text(std::string(kBase) + "sweep:\n  grid: {optimizer.lr: [0.1, 0.2], run.seed: " + seeds + "}\n",
                           "s.yaml");
  };
  const SweepPlan small = plan("[0]"), grown = plan("[0, 1]");
  // A single seed does not vary, so it is not in the ids; a second one adds it.
  EXPECT_EQ(ids(small), (std::vector<std::string>{"lr=0.1", "lr=0.2"}));
  EXPECT_EQ(ids(grown), (std::vector<std::string>{"lr=0.1,seed=0", "lr=0.1,seed=1", "lr=0.2,seed=0", "lr=0.2,seed=1"}));
  const SweepPlan again = plan("[0, 1]");
  for (size_t i = 0; i < grown.runs.size(); ++i) EXPECT_EQ(grown.runs[i].experiment, again.runs[i].experiment);
  // Identical cells run once: an include that repeats a grid cell adds nothing.
  const SweepPlan dup = plan_sweep_text(
      std::string(kBase) + "sweep:\n  grid: {optimizer.lr: [0.1, 0.2]}\n  include: [{optimizer.lr: 0.2}]\n", "d.yaml");
  EXPECT_EQ(ids(dup), (std::vector<std::string>{"lr=0.1", "lr=0.2"}));
}

TEST(SweepPlan, RunIds) {
  std::vector<std::vector<Leaf>> labels;
  EXPECT_EQ(make_run_ids({{{"model.type", "mlp"}, {"scheme.type", "gpipe"}},
                          {{"model.type", "cnn"}, {"scheme.type", "gpipe"}},
                          {{"model.type", "cnn"}, {"scheme.type", "naive"}}},
                         &labels),
            (std::vector<std::string>{"model.type=mlp,scheme.type=gpipe", "model.type=cnn,scheme.type=gpipe",
                                      "model.type=cnn,scheme.type=naive"}));
  EXPECT_EQ(labels[2], (std::vector<Leaf>{{"model.type", "cnn"}, {"scheme.type", "naive"}}));
  EXPECT_EQ(make_run_ids({{{"dataset.path", "data/a b.pt"}}, {{"dataset.path", "data/c.pt"}}}),
            (std::vector<std::string>{"path=data_a_b.pt", "path=data_c.pt"}));
  EXPECT_EQ(make_run_ids({{{"run.seed", "0"}}}), std::vector<std::string>{"run"});
  EXPECT_EQ(make_run_ids({{{"x", "a/b"}}, {{"x", "a_b"}}}), (std::vector<std::string>{"x=a_b", "x=a_b~2"}));
  const std::string long_value(300, 'v');
  const std::vector<std::string> longs = make_run_ids({{{"x", long_value}}, {{"x", long_value + "w"}}});
  EXPECT_EQ(longs[0].size(), 99u);  // 90 characters, '~' and 8 hex digits of the whole id
  EXPECT_NE(longs[0], longs[1]);
  // Several values: shortened between whole pairs, never inside a value.
  const std::string path(50, 'p'), type(20, 't');
  const std::vector<std::string> pairs = make_run_ids(
      {{{"optimizer.lr", "0.000123456789"}, {"dataset.path", path + "a"}, {"run.seed", "1"}, {"scheme.type", type}},
       {{"optimizer.lr", "0.000223456789"}, {"dataset.path", path + "b"}, {"run.seed", "2"}, {"scheme.type", "u"}}});
  EXPECT_EQ(pairs[0].substr(0, pairs[0].find('~')), "lr=0.000123456789,path=" + path + "a,seed=1");
  EXPECT_NE(pairs[0], pairs[1]);
}

TEST(SweepPlan, EntriesANarrowedGridNoLongerSelectsAreSkippedAndSaid) {
  // A shipped sweep shrunk on the command line to run in miniature: its exclude and override
  // entries for the cells left out select nothing, and are skipped with a note, not fatal.
  const std::string text = std::string(kBase) +
                           "sweep:\n  grid: {run.seed: [0, 1, 2]}\n  exclude: [{run.seed: 2}]\n"
                           "  overrides: [{match: {run.seed: 1}, set: {optimizer.lr: 0.05}}]\n";
  const SweepPlan p = plan_sweep_text(text, "demo.yaml", {"sweep.grid={run.seed: [0]}"});
  ASSERT_EQ(p.runs.size(), 1u);
  ASSERT_EQ(p.skipped.size(), 2u);
  EXPECT_HAS(p.skipped[0], "sweep.exclude[0] (demo.yaml:9:13) selects no cell of the grid as narrowed by --set "
                           "sweep.grid={run.seed: [0]}: skipped");
  EXPECT_HAS(p.skipped[1], "sweep.overrides[0]");
  // Unnarrowed, the same entries are mistakes.
  EXPECT_HAS(testing::user_error([&] { plan_sweep_text(std::string(kBase) +
                                                           "sweep:\n  grid: {run.seed: [0]}\n  exclude: [{run.seed: 2}]\n",
                                                       "demo.yaml"); }),
             "selects no cell of the sweep");
}

TEST(SweepPlan, APresetReshapesTheSweepAndHoldsInEveryCell) {
  // A seed's cpu-mini: it narrows the grid (the override for the cell left out is skipped,
  // naming the preset's line), moves the output, and its run.epochs holds over the override
  // that sets the epochs of the cell it keeps.
  const std::string text = std::string(kBase) +
                           "sweep:\n  grid: {run.seed: [0, 1, 2]}\n"
                           "  overrides: [{match: {run.seed: 0}, set: {run.epochs: 30}}, {match: {run.seed: 2}, set: "
                           "{optimizer.lr: 0.05}}]\n"
                           "presets:\n  mini: {sweep.grid: {run.seed: [0]}, sweep.output: runs/mini, run.epochs: 2}\n";
  const SweepPlan full = plan_sweep_text(text, "demo.yaml");
  ASSERT_EQ(full.runs.size(), 3u);
  EXPECT_EQ(value(full.runs[0], "run.epochs"), "30");
  const SweepPlan p = plan_sweep_text(text, "demo.yaml", {"preset=mini"});
  ASSERT_EQ(p.runs.size(), 1u);
  EXPECT_EQ(p.output, "runs/mini");
  EXPECT_EQ(value(p.runs[0], "run.epochs"), "2");
  ASSERT_EQ(p.skipped.size(), 1u);
  EXPECT_HAS(p.skipped[0], "sweep.overrides[1] (demo.yaml:9:62) selects no cell of the grid as narrowed by "
                           "demo.yaml:11:10 (preset mini): skipped");
  // A grid value the preset replaces leaves the cells' ids, and cells it makes equal run once.
  const SweepPlan epochs = plan_sweep_text(text, "demo.yaml", {"preset=mini", "sweep.overrides=[]",
                                                               "sweep.grid={run.epochs: [3, 4], run.seed: [0, 1]}"});
  EXPECT_EQ(ids(epochs), (std::vector<std::string>{"seed=0", "seed=1"}));
  // The user's --set wins over the preset, in every cell too.
  EXPECT_EQ(value(plan_sweep_text(text, "demo.yaml", {"preset=mini", "run.epochs=4"}).runs[0], "run.epochs"), "4");
}

TEST(SweepPlan, ErrorsNameTheLineAndTheFix) {
  // Lines of kBase are 1-6, so `sweep:` is line 7.
  std::string msg = error_of("sweep:\n  grid:\n    run.seed: 3\n");
  EXPECT_HAS(msg, "demo.yaml:9:15: sweep.grid.run.seed: expected a list of the values to try, got a single value");
  EXPECT_HAS(msg, "Fix: write sweep.grid.run.seed: [value1, value2]");
  // A bad value in one cell fails the whole sweep, pointing at that value.
  msg = error_of("sweep:\n  grid:\n    optimizer.lr: [0.1, -1]\n");
  EXPECT_HAS(msg, "demo.yaml:9:25: optimizer.lr: must be a number in (0, 1e+30], got -1");
  msg = error_of("sweep:\n  grid:\n    optimizer.momentun: [0.9]\n");
  EXPECT_HAS(msg, "demo.yaml:9:26: optimizer.momentun: unknown key 'momentun' in 'optimizer'");
  EXPECT_HAS(msg, "use one of: momentum");
  // A key the base's scheme does not take: the grid value is named, and so is the cell.
  msg = error_of("sweep:\n  grid:\n    scheme.chunks: [2]\n");
  EXPECT_HAS(msg,
             "demo.yaml:9:21: scheme.chunks: unknown key 'chunks' in 'scheme'. Fix: remove it. (In the sweep cell "
             "scheme.chunks=2.)");
  msg = error_of("sweep:\n  grids: {run.seed: [0]}\n");
  EXPECT_HAS(msg, "demo.yaml:8:3: sweep.grids: unknown key 'grids' in 'sweep'. Fix: remove it or use one of: grid");
  msg = error_of("sweep:\n  grid: {run.seed: [0, 1]}\n  exclude: [{run.seed: 2}]\n");
  EXPECT_HAS(msg, "demo.yaml:9:13: sweep.exclude[0]: selects no cell of the sweep");
  msg = error_of("sweep:\n  grid: {run.seed: [0, 1]}\n  overrides: [{match: {run.seed: 1}}]\n");
  EXPECT_HAS(msg, "sweep.overrides[0]: missing required key 'set'");
  msg = error_of("sweep:\n  grid: {run.output: [a, b]}\n");
  EXPECT_HAS(msg, "demo.yaml:8:10: sweep.grid.run.output: the sweep sets each cell's run.output");
  msg = error_of("sweep:\n  grid: {scheme: [{type: naive}], scheme.type: [gpipe]}\n");
  EXPECT_HAS(msg, "'scheme.type' overlaps 'scheme' in the same grid");
  msg = error_of("sweep:\n  output: x\n");
  EXPECT_HAS(msg, "demo.yaml:8:3: sweep: the sweep has no cells");
  EXPECT_HAS(testing::user_error([] { plan_sweep_text(kBase, "plain.yaml"); }),
             "plain.yaml:1:1: (top level): no 'sweep' section");
  // --set reaches the sweep section too, and errors name it.
  msg = testing::user_error([] {
    plan_sweep_text(std::string(kBase) + "sweep: {grid: {run.seed: [0]}}\n", "demo.yaml", {"sweep.grid={run.seed: 5}"});
  });
  EXPECT_HAS(msg, "--set sweep.grid={run.seed: 5}: sweep.grid.run.seed: expected a list");
}

TEST(SweepPlan, EveryCellKeepsEveryKeyOfTheExperiment) {
  // Every section a run reads, dataset.limit and test_limit included (they are read apart
  // from the dataset's own options, and once were dropped from every cell).
  const std::string base = R"(model: {type: mlp, sizes: [8, 16, 16, 3], dropout: 0.1}
dataset: {type: synthetic, samples: 64, test_samples: 32, shape: [8], classes: 3, limit: 48, test_limit: 16}
partition: {stages: 2, balance: [2, 1]}
scheme: {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9, clip_grad_norm: 1}
lr_schedule: {type: step, step_size: 1, gamma: 0.5}
compression: {activations: {type: cast, dtype: bf16}}
run: {epochs: 1, batch_size: 16, seed: 3}
)";
  const SweepPlan p = plan_sweep_text(base + "sweep:\n  grid: {dataset.limit: [32, 48], run.seed: [0, 1]}\n", "all.yaml",
                                      {"dataset.test_limit=8"});
  ASSERT_EQ(ids(p), (std::vector<std::string>{"limit=32,seed=0", "limit=32,seed=1", "limit=48,seed=0", "limit=48,seed=1"}));
  std::vector<std::pair<std::string, std::string>> leaves;
  flatten_leaves("", YAML::Load(base), leaves);
  for (const PlannedRun& r : p.runs) {
    std::vector<std::pair<std::string, std::string>> cell;
    flatten_leaves("", YAML::Load(r.experiment), cell);
    for (const auto& [key, text] : leaves) {
      const auto it = std::find_if(cell.begin(), cell.end(), [&](const auto& kv) { return kv.first == key; });
      ASSERT_NE(it, cell.end()) << r.id << " lost " << key << ":\n" << r.experiment;
      const std::string want = key == "dataset.limit"        ? r.id.substr(6, 2)
                               : key == "dataset.test_limit" ? "8"
                               : key == "run.seed"           ? r.id.substr(r.id.size() - 1)
                                                             : text;
      EXPECT_EQ(it->second, want) << r.id << " " << key;
    }
  }
}

TEST(SweepPlan, RunSaysToUseSweep) {
  const std::string msg = testing::user_error(
      [] { Experiment::parse(std::string(kBase) + "sweep: {grid: {run.seed: [0, 1]}}\n", "demo.yaml"); });
  EXPECT_HAS(msg,
             "demo.yaml:7:8: sweep: a grid of runs. Fix: run it with `pipelab sweep demo.yaml`");
}

}  // namespace
}  // namespace pipelab::tools::sweep_plan_test
