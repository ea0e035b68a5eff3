// `pipelab plan` (tools/plan/planner.h): the search ranks what the simulator says of each
// candidate, one device and data parallelism are candidates, the schedule-aware cut beats
// the FLOPs cut where memory traffic matters, constraints name what failed and by how much,
// the emitted file runs, and with unit costs the figures the planner ranks by are the papers'
// closed forms (docs/schedules.md "Built-in schedules"; the zero-bubble paper's bubble of ZB-H1).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/config/registry.h"
#include "core/experiment/plan_request.h"
#include "core/io/pt_file.h"
#include "core/model/block_costs.h"
#include "core/plan/run_plan.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"
#include "tools/cli/cost_flags.h"
#include "tools/plan/candidates.h"
#include "tools/plan/plan_report.h"

namespace pipelab::plan_test {
namespace {

/// The input flags `pipelab plan` takes, none given (the dataset gives the shapes).
cli::po::variables_map no_flags() {
  cli::po::options_description o;
  cli::add_input_options(o);
  cli::po::variables_map vm;
  cli::po::store(cli::po::command_line_parser(std::vector<std::string>{}).options(o).run(), vm);
  cli::po::notify(vm);
  return vm;
}

struct Planned {
  plan::PlanSpace space;
  plan::PlanResult result;
};

/// Plans the experiment file `path` on `devices` devices with costs derived for `device`.
Planned plan_of(const std::string& path, int devices, sim::DeviceSpec device,
                const std::function<void(plan::PlanSpace&)>& adjust = {}) {
  const Experiment e = Experiment::load(path);
  const cli::po::variables_map vm = no_flags();
  device.optimizer_states = sim::optimizer_states(*e.optimizer);
  const sim::CostSource source = cli::cost_source(e, vm, "", device);
  Planned p;
  p.space.schemes = plan::default_schemes(false);
  p.space.devices = devices;
  p.space.batch = static_cast<int>(e.run.batch_size);
  p.space.block_flops = source.block_flops();
  p.space.time_limit = 60;
  if (adjust) adjust(p.space);
  p.result = plan::search(
      e, p.space,
      [&](const std::vector<int>& b, double examples, const CompressionSection& codecs) {
        return source.costs_for(b, examples, codecs);
      },
      {});
  return p;
}

sim::DeviceSpec device(double tflops, double latency_us = 0, double memory_gbs = 0) {
  sim::DeviceSpec d;
  d.tflops = tflops;
  d.link.latency_us = latency_us;
  d.memory_gbs = memory_gbs;
  return d;
}

const char* kDeep = R"(
model:     {type: mlp, sizes: [64, 256, 256, 256, 256, 256, 256, 256, 10]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [64], classes: 10}
scheme:    {type: gpipe, chunks: 4}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 32, seed: 0, threads: 1, progress: false}
)";

/// `yaml` as an experiment file in `dir`.
std::string file_of(const testing::TempDir& dir, const std::string& yaml) {
  testing::write_text(dir.file("e.yaml"), yaml);
  return dir.file("e.yaml");
}

TEST(Plan, RanksBySimulatedStepOverEveryShapeThatFillsTheDevices) {
  testing::TempDir dir;
  const Planned p = plan_of(file_of(dir, kDeep), 4, device(1e-4));
  const plan::PlanResult& r = p.result;
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_GT(r.enumerated, r.simulated / 2);
  for (size_t i = 1; i < r.ranked.size(); ++i) EXPECT_LE(r.ranked[i - 1].step, r.ranked[i].step * (1 + 1e-5));
  std::set<std::string> types;
  for (const plan::Candidate& c : r.ranked) {
    EXPECT_EQ(c.topology.devices, 4) << c.label;
    EXPECT_EQ(c.staleness, 0) << c.label;  // synchronous schedules only by default
    types.insert((*c.section)["type"].as<std::string>());
  }
  for (const plan::Candidate& c : r.lost) EXPECT_FALSE(c.lost.empty()) << c.label;
  // A compute-bound model on 4 devices pipelines (or replicates): the winner uses them all.
  EXPECT_GT(r.ranked.front().samples_per_second, 0);
  EXPECT_GE(types.size(), 2u);
}

// What the planner varies comes from the option keys a scheme declares: Chimera's `chunks`
// are searched (a probe that built each scheme with 3 micro-batches found none, since
// Chimera takes an even count, and planned it at its default only).
TEST(Plan, ASchemesMicroBatchKnobIsReadFromItsOptions) {
  testing::TempDir dir;
  const Planned p = plan_of(file_of(dir, kDeep), 4, device(100), [](plan::PlanSpace& s) { s.schemes = {"chimera"}; });
  std::set<int> counts;
  for (const plan::Candidate& c : p.result.ranked) counts.insert(c.micro_batches);
  EXPECT_GE(counts.size(), 2u) << "chimera planned at " << counts.size() << " micro-batch count(s)";
}

TEST(Plan, TheBoundIsNeverAboveTheReplayedStep) {
  // Branch and bound skips a candidate whose bound exceeds the table's last step: a bound
  // above a candidate's own step would skip a winner. Every candidate replayed here (no
  // table limit), with replicas (their all-reduce is in the bound), recomputation and the
  // asynchronous schemes, on a link with latency and a device with memory traffic.
  testing::TempDir dir;
  const Planned p = plan_of(file_of(dir, kDeep), 8, device(1e-3, 20, 50), [](plan::PlanSpace& s) {
    s.allow_idle = true;
    s.top = 1000000;
    s.max_staleness = 100;
    s.schemes = plan::default_schemes(true);
  });
  int replayed = 0;
  for (const auto* list : {&p.result.ranked, &p.result.lost}) {
    for (const plan::Candidate& c : *list) {
      if (!c.simulated) continue;
      ++replayed;
      EXPECT_LE(c.bound, c.step * (1 + 1e-9)) << c.label << " on " << c.stages << " x " << c.replicas;
    }
  }
  EXPECT_GT(replayed, 200);
}

TEST(Plan, RaggedTextCostsEachStepAtItsMeanLength) {
  // `plan --tokens L`: sequences of L tokens on average rather than the model's 32. On a
  // compute-bound device every candidate's step is a quarter at 8 tokens, and the bound
  // that prunes stays below each replayed step.
  testing::TempDir dir;
  const std::string path = file_of(dir, R"(
model:     {type: transformer, head: lm, num_words: 64, d_model: 32, heads: 2, ff: 64, layers: 4, dropout: 0.0}
dataset:   {type: synthetic, tokens: {vocabulary: 64, length: 32}, samples: 64, test_samples: 16}
scheme:    {type: gpipe, chunks: 4}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 32, seed: 0, threads: 1, progress: false}
)");
  const Planned full = plan_of(path, 4, device(1e-3));
  const Planned quarter = plan_of(path, 4, device(1e-3), [](plan::PlanSpace& s) { s.token_length = 8; });
  ASSERT_FALSE(full.result.ranked.empty());
  ASSERT_FALSE(quarter.result.ranked.empty());
  // Every plan ranked at both lengths takes a quarter of its step (the winner may differ:
  // plans of equal steps are ranked by their peaks, and activations shrink with the tokens
  // where weights do not).
  std::map<std::string, double> steps;
  for (const plan::Candidate& c : full.result.ranked) steps[fmt::format("{} {}x{}", c.label, c.stages, c.replicas)] = c.step;
  int both = 0;
  for (const plan::Candidate& c : quarter.result.ranked) {
    const auto it = steps.find(fmt::format("{} {}x{}", c.label, c.stages, c.replicas));
    if (it == steps.end()) continue;
    ++both;
    EXPECT_NEAR(c.step / it->second, 0.25, 1e-6) << c.label;
  }
  EXPECT_GT(both, 3);
  EXPECT_NEAR(quarter.result.ranked.front().step / full.result.ranked.front().step, 0.25, 1e-6);
  for (const plan::Candidate& c : quarter.result.ranked) EXPECT_LE(c.bound, c.step * (1 + 1e-9)) << c.label;
}

TEST(Plan, SchemesThatRefuseTheOptimizerAreNotRanked) {
  // XPipe predicts with Adam's moments: with the file's SGD its stages would refuse to
  // build, so no XPipe plan is ranked (its emitted file would not run), and the scheme's
  // line says why; with Adam it is ranked.
  testing::TempDir dir;
  const auto with_async = [](plan::PlanSpace& s) {
    s.schemes = {"xpipe", "pipedream_2bw"};
    s.max_staleness = 100;
    s.top = 1000;
  };
  const Planned sgd = plan_of(file_of(dir, kDeep), 4, device(1e-4), with_async);
  for (const plan::Candidate& c : sgd.result.ranked) EXPECT_EQ(c.label.find("xpipe"), std::string::npos) << c.label;
  EXPECT_FALSE(sgd.result.ranked.empty());
  const auto xpipe = std::find_if(sgd.result.lost.begin(), sgd.result.lost.end(),
                                  [](const plan::Candidate& c) { return c.label == "xpipe"; });
  ASSERT_NE(xpipe, sgd.result.lost.end());
  EXPECT_NE(xpipe->lost.find("XPipe predicts the weights with Adam's moments"), std::string::npos) << xpipe->lost;
  std::string adam_file = kDeep;
  adam_file.replace(adam_file.find("{type: sgd, lr: 0.05}"), 21, "{type: adam, lr: 0.001}");
  const Planned adam = plan_of(file_of(dir, adam_file), 4, device(1e-4), with_async);
  EXPECT_TRUE(std::any_of(adam.result.ranked.begin(), adam.result.ranked.end(),
                          [](const plan::Candidate& c) { return c.label.find("xpipe") != std::string::npos; }));
}

TEST(Plan, ALatencyBoundModelIsNotPipelined) {
  // A tiny model on fast devices with a slow link: every message and every all-reduce costs
  // more than the compute, so one device wins (the idle ones allowed).
  testing::TempDir dir;
  const Planned p =
      plan_of(file_of(dir, kDeep), 4, device(1e3, 1000), [](plan::PlanSpace& s) { s.allow_idle = true; });
  ASSERT_FALSE(p.result.ranked.empty());
  EXPECT_EQ(p.result.ranked.front().topology.devices, 1) << p.result.ranked.front().label;
  EXPECT_EQ(p.result.ranked.front().stages, 1);
}

TEST(Plan, TheScheduleAwareCutBeatsTheFlopsCut) {
  // A language model whose embedding and head weigh more in memory traffic than in FLOPs:
  // with the device's memory bandwidth in the costs, the cut searched on the schedule is
  // shorter than the FLOPs-balanced one.
  testing::TempDir dir;
  const at::Tensor x = at::arange(64 * 16, at::kLong).reshape({64, 16}).remainder(2000);
  save_tensor_dict(dir.file("lm.pt"), {{"x", x}, {"y", x.roll(-1, 1)}});
  const char* lm = R"(
model:     {type: transformer, num_words: 2000, d_model: 64, heads: 2, ff: 128, layers: 4, head: lm}
dataset:   {type: tensors, path: lm.pt}
scheme:    {type: pipedream_flush, chunks: 4}
optimizer: {type: adam, lr: 0.001}
run:       {epochs: 1, batch_size: 16, seed: 0, threads: 1, progress: false}
)";
  const Planned p = plan_of(file_of(dir, lm), 4, device(1e-3, 0, 0.05), [](plan::PlanSpace& s) {
    s.schemes = {"pipedream_flush"};
  });
  ASSERT_FALSE(p.result.ranked.empty());
  const plan::Candidate& best = p.result.ranked.front();
  EXPECT_TRUE(best.searched_cut) << best.label;
  // The same candidate on the FLOPs cut, replayed: slower.
  const Experiment e = Experiment::load(dir.file("e.yaml"));
  sim::DeviceSpec d = device(1e-3, 0, 0.05);
  const cli::po::variables_map vm = no_flags();
  d.optimizer_states = sim::optimizer_states(*e.optimizer);
  const sim::CostSource source = cli::cost_source(e, vm, "", d);
  const plan::CostsOf costs = [&](const std::vector<int>& b, double n, const CompressionSection& codecs) {
    return source.costs_for(b, n, codecs);
  };
  plan::Candidate flops = best;
  flops.balance = balance_by_weight(with_floor(p.space.block_flops), best.stages);
  ASSERT_NE(flops.balance, best.balance);
  ASSERT_TRUE(plan::replay(flops, e, p.space, costs, {})) << flops.lost;
  EXPECT_LT(best.step, flops.step);
}

TEST(Plan, NothingFitsNamesTheCapAndByHowMuch) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kExperiment);
  const auto [code, out] =
      testing::pipelab(fmt::format("plan {} --devices 2 --device-flops 1 --memory-cap 0.000001", dir.file("e.yaml")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("over the cap"), std::string::npos) << out;
  EXPECT_NE(out.find("Fix:"), std::string::npos) << out;
}

TEST(Plan, BadFlagsAreRefused) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kExperiment);
  for (const std::string flags : {"--devices 0 --device-flops 1", "--devices 2", "--devices 2 --device-flops 1 "
                                  "--max-staleness 2", "--devices 2 --device-flops 1 --time-limit -1"}) {
    const auto [code, out] = testing::pipelab(fmt::format("plan {} {}", dir.file("e.yaml"), flags));
    EXPECT_EQ(code, 2) << flags << "\n" << out;
  }
}

TEST(Plan, TheEmittedExperimentRunsThePlan) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kExperiment);
  const auto [code, out] = testing::pipelab(fmt::format("plan {} --devices 2 --device-flops 1 --emit {} --svg {}",
                                                        dir.file("e.yaml"), dir.file("out/best.yaml"),
                                                        dir.file("front.svg")));
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("best: "), std::string::npos) << out;
  EXPECT_NE(testing::read_text(dir.file("front.svg")).find("<svg"), std::string::npos);
  const Experiment best = Experiment::load(dir.file("out/best.yaml"));
  const RunPlan plan = RunPlan::compile(plan_request(best));
  EXPECT_EQ(plan.devices(), 2);
  const auto [rc, run] = testing::pipelab(fmt::format("run --quiet {} --set run.epochs=1 --set run.output={}",
                                                      dir.file("out/best.yaml"), dir.file("run")));
  EXPECT_EQ(rc, 0) << run;
  // An existing file, the experiment itself included, is replaced only when asked.
  const std::string file = testing::read_text(dir.file("e.yaml"));
  for (const char* target : {"e.yaml", "out/best.yaml"}) {
    const auto [again, text] =
        testing::pipelab(fmt::format("plan {} --devices 2 --device-flops 1 --emit {}", dir.file("e.yaml"), dir.file(target)));
    EXPECT_EQ(again, 2) << text;
    EXPECT_NE(text.find("the file exists. Fix: give another path, or add --overwrite"), std::string::npos) << text;
  }
  EXPECT_EQ(testing::read_text(dir.file("e.yaml")), file);
  const auto [replaced, log] = testing::pipelab(
      fmt::format("plan {} --devices 2 --device-flops 1 --emit {} --overwrite", dir.file("e.yaml"), dir.file("out/best.yaml")));
  EXPECT_EQ(replaced, 0) << log;
}

// What is emitted is what was planned: the --set values, the preset's settings (and no
// presets: section), and the precision --dtype priced; the emitted file runs (the fifth
// hardening probe: a shrunk model was emitted whole with the small model's cut).
TEST(Plan, TheEmittedFileIsWhatWasPlannedSetsPresetAndPrecision) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), R"(
model:     {type: mlp, sizes: [12, 64, 64, 64, 4]}
dataset:   {type: synthetic, samples: 128, test_samples: 32, shape: [12], classes: 4}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 16, seed: 0, threads: 1, progress: false}
presets:
  wide: {run.batch_size: 32}
)");
  const auto [code, out] = testing::pipelab(fmt::format(
      "plan {} --devices 2 --device-flops 1 --dtype bfloat16 --set 'model.sizes=[12, 24, 24, 4]' --preset wide "
      "--emit {}",
      dir.file("e.yaml"), dir.file("best.yaml")));
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("precision: --dtype bfloat16 plans the run with run.amp: bf16, which the emitted file sets"),
            std::string::npos)
      << out;
  const YAML::Node emitted = YAML::LoadFile(dir.file("best.yaml"));
  EXPECT_EQ(emitted["model"]["sizes"].as<std::vector<int>>(), (std::vector<int>{12, 24, 24, 4}));
  EXPECT_EQ(emitted["run"]["batch_size"].as<int>(), 32);
  EXPECT_EQ(emitted["run"]["amp"].as<std::string>(), "bf16");
  // The file's presets were applied, not copied; the plan's own miniature is added.
  EXPECT_FALSE(emitted["presets"]["wide"]);
  EXPECT_TRUE(emitted["presets"]["cpu-mini"]);
  EXPECT_FALSE(emitted["preset"]);
  const auto [rc, run] = testing::pipelab(
      fmt::format("run --quiet {} --set run.devices=[cpu] --set run.output={}", dir.file("best.yaml"), dir.file("run")));
  EXPECT_EQ(rc, 0) << run;
}

/// Unit costs: F = I = W = 1 (B = 2), one full stage's activation = 1 byte, nothing moves.
sim::SimCosts unit_costs(int stages, double retained) {
  sim::SimCosts c;
  for (int s = 0; s < stages; ++s) {
    sim::StageCosts k;
    k.seconds[ActionKind::Forward] = 1;
    k.seconds[ActionKind::BackwardInput] = 1;
    k.seconds[ActionKind::BackwardWeight] = 1;
    k.seconds[ActionKind::Backward] = 2;
    k.retained_bytes = retained;
    c.stages.push_back(k);
  }
  return c;
}

sim::SimResult unit_replay(const std::string& type, int stages, int m, double retained) {
  const std::unique_ptr<Scheme> s = plan::make_scheme(YAML::Load(fmt::format("{{type: {}, chunks: {}}}", type, m)));
  const RunPlan plan = RunPlan::whole_pipelines(*s, stages, 1, {});
  return sim::simulate(plan, m, 1, unit_costs(stages, retained), {}, m);
}

// The closed forms with unit costs: 1F1B's and GPipe's bubble (p-1)/(m+p-1); ZB-H1's idle
// time per device (p-1)(F+I-W) (the zero-bubble paper), a third of 1F1B's; 1F1B's peak of p
// micro-batches' activations on its first device, V-Half's (p+2)//2 and V-Min's (p+4)//3
// (docs/schedules.md "Built-in schedules", in full-stage activations: a V's chunk holds half).
TEST(Plan, UnitCostFiguresAreThePapersClosedForms) {
  for (int p : {4, 8, 16}) {
    for (int m : {p, 2 * p, 4 * p}) {
      SCOPED_TRACE(fmt::format("p {} m {}", p, m));
      const double one_f_one_b = static_cast<double>(p - 1) / (m + p - 1);
      EXPECT_NEAR(unit_replay("pipedream_flush", p, m, 1).bubble, one_f_one_b, 1e-9);
      EXPECT_NEAR(unit_replay("gpipe", p, m, 1).bubble, one_f_one_b, 1e-9);
      const sim::SimResult zb = unit_replay("zb_h1", p, m, 1);
      EXPECT_NEAR(zb.bubble * zb.makespan, (p - 1.0), 1e-9);
      EXPECT_DOUBLE_EQ(unit_replay("pipedream_flush", p, m, 1).peak_activation_bytes[0], p);
      const sim::SimResult half = unit_replay("v_half", 2 * p, m, 0.5), min = unit_replay("v_min", 2 * p, m, 0.5);
      EXPECT_DOUBLE_EQ(*std::max_element(half.peak_activation_bytes.begin(), half.peak_activation_bytes.end()),
                       (p + 2) / 2);
      EXPECT_DOUBLE_EQ(*std::max_element(min.peak_activation_bytes.begin(), min.peak_activation_bytes.end()),
                       (p + 4) / 3);
    }
  }
}

// ZB-V and DualPipe-V with unit chunk costs (F = I = W = 1 per chunk) and m >= 2p: each
// device idles p - 1 units, the fill no V-shaped schedule can avoid (device p - 1's first
// chunk waits for p - 1 forwards, and the drain mirrors it), and ZB-V keeps 1F1B's peak of p
// micro-batches' activations (the zero-bubble paper's memory for ZB-V: p x M_B). The
// reference docs give no closed form for DualPipe-V: its figures here are derived (one
// chunk's activations more than ZB-V's peak), pinned so that a change to them is seen.
TEST(Plan, UnitCostFiguresOfTheVSchedules) {
  for (int p : {4, 8, 16}) {
    for (int m : {2 * p, 4 * p}) {
      SCOPED_TRACE(fmt::format("p {} m {}", p, m));
      for (const char* type : {"zbv", "dualpipe_v"}) {
        const sim::SimResult r = unit_replay(type, 2 * p, m, 0.5);
        const double busy = 2.0 * m * 3;  // two chunks, F + I + W each, per micro-batch
        EXPECT_NEAR(r.makespan - busy, p - 1.0, 1e-9) << type;
        const double peak = *std::max_element(r.peak_activation_bytes.begin(), r.peak_activation_bytes.end());
        EXPECT_DOUBLE_EQ(peak, std::string(type) == "zbv" ? p : p + 0.5) << type;
      }
    }
  }
}

/// A cast to bf16 on both directions of every boundary.
std::shared_ptr<const CompressionSection> cast_codecs() {
  const YAML::Node section = YAML::Load("{activations: {type: cast}, gradients: {type: cast}}");
  return std::make_shared<CompressionSection>(
      read_compression(ConfigNode(section, std::make_shared<ConfigSource>("test"), "compression")));
}

TEST(Plan, OnASlowLinkEachPipelineIsAlsoTriedWithACodec) {
  // A link 100 times slower than the compute: every message costs more than a stage's work,
  // so the pipeline whose messages are cast to bf16 moves half the bytes and runs faster
  // than the same pipeline uncompressed; a plan of one stage has no boundary to code.
  testing::TempDir dir;
  sim::DeviceSpec d = device(1e-3);
  d.link.gbps = 0.01;
  const Planned p = plan_of(file_of(dir, kDeep), 4, d, [](plan::PlanSpace& s) {
    s.top = 1000000;
    s.schemes = {"dp", "gpipe", "pipedream_flush"};
    s.compress = cast_codecs();
  });
  std::map<std::string, const plan::Candidate*> plain;
  for (const plan::Candidate& c : p.result.ranked) {
    ASSERT_TRUE(c.compression) << c.label;
    if (!c.compression->any()) plain[fmt::format("{} {}x{}", c.label, c.stages, c.replicas)] = &c;
  }
  int coded = 0;
  for (const plan::Candidate& c : p.result.ranked) {
    if (!c.compression->any()) continue;
    ++coded;
    EXPECT_GT(c.stages, 1) << c.label;
    const std::string twin = c.label.substr(0, c.label.find(" codec=cast"));
    const auto it = plain.find(fmt::format("{} {}x{}", twin, c.stages, c.replicas));
    ASSERT_NE(it, plain.end()) << c.label;
    // One pipeline moves only its boundaries' messages: half of them; replicas add an
    // all-reduce the codec leaves as it is.
    if (c.replicas == 1) EXPECT_NEAR(c.bytes, it->second->bytes / 2, it->second->bytes * 1e-3) << c.label;
    EXPECT_LT(c.bytes, it->second->bytes) << c.label;
    EXPECT_LT(c.step, it->second->step) << c.label;
  }
  EXPECT_GT(coded, 10);
  EXPECT_NE(p.result.ranked.front().label.find(" codec=cast"), std::string::npos) << p.result.ranked.front().label;
}

TEST(Plan, CompressBelowEmitsTheCodecItChoseAndSaysWhy) {
  testing::TempDir dir;
  const std::string file = file_of(dir, kDeep);
  const std::string base = fmt::format("plan {} --devices 2 --device-flops 0.001 --schemes gpipe", file);
  const auto [code, out] = testing::pipelab(base + fmt::format(" --link-gbps 0.01 --compress-below 1 --emit {} --json {}",
                                                               dir.file("best.yaml"), dir.file("ranked.json")));
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("is slower than --compress-below 1"), std::string::npos) << out;
  EXPECT_NE(out.find("codec=cast"), std::string::npos) << out;
  EXPECT_NE(testing::read_text(dir.file("ranked.json")).find("\"compression\": \"{activations: {type: cast"),
            std::string::npos);
  const Experiment best = Experiment::load(dir.file("best.yaml"));
  ASSERT_TRUE(best.compression.any());
  EXPECT_EQ(best.compression.activations->type(), "cast");
  const auto [rc, run] = testing::pipelab(fmt::format("run --quiet {} --set run.epochs=1 --set run.output={}",
                                                      dir.file("best.yaml"), dir.file("run")));
  EXPECT_EQ(rc, 0) << run;
  // A fast link: no codec is tried. A codec without the threshold, or one that is not one: exit 2.
  const auto [fast, fast_out] = testing::pipelab(base + " --link-gbps 100 --compress-below 1");
  EXPECT_EQ(fast, 0) << fast_out;
  EXPECT_NE(fast_out.find("not slower than --compress-below 1: no codec tried"), std::string::npos) << fast_out;
  EXPECT_EQ(fast_out.find("codec="), std::string::npos) << fast_out;
  for (const std::string flags : {" --codec '{type: cast}'", " --link-gbps 0.01 --compress-below 1 --codec '{type: nope}'",
                                  " --link-gbps 0.01 --compress-below 1 --codec '{type: [}'",
                                  " --compress-below -1"}) {
    const auto [bad, bad_out] = testing::pipelab(base + flags);
    EXPECT_EQ(bad, 2) << flags << "\n" << bad_out;
  }
}

}  // namespace
}  // namespace pipelab::plan_test

namespace pipelab::plan_test {
namespace {

/// Writes testing::kExperiment to DIR/e.yaml and trains it for one traced epoch: its
/// metrics/costs.json ("" when the run failed, whose log the failure shows).
std::string measured_costs(const testing::TempDir& dir) {
  testing::write_text(dir.file("e.yaml"), testing::kExperiment);
  const auto [rc, log] = testing::pipelab(fmt::format("run --quiet {} --set run.epochs=1 --set run.trace=true "
                                                      "--set run.output={}",
                                                      dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(rc, 0) << log;
  return rc == 0 ? dir.file("run/metrics/costs.json") : "";
}

// A run's measured costs are per stage: the plan keeps their stage count and partition, and
// says so of every candidate with another.
TEST(Plan, MeasuredCostsKeepTheirStages) {
  testing::TempDir dir;
  const std::string costs = measured_costs(dir);
  ASSERT_FALSE(costs.empty());
  const auto [code, out] =
      testing::pipelab(fmt::format("plan {} --devices 2 --costs {} --explain", dir.file("e.yaml"), costs));
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("| measured |"), std::string::npos) << out;
  // What costs measured in a run were found to be worth, under the costs' line.
  EXPECT_NE(out.find("\nchecked: " + sim::cost_validation(sim::CostKind::Measured) + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("the measured costs are for 2 stages, not 1"), std::string::npos) << out;
  EXPECT_EQ(out.find("| 1 x "), std::string::npos) << out;  // no one-stage plan is ranked
}

// Costs measured on another model (here: the same MLP, wider) are refused, naming both
// parameter counts and how to measure the right ones.
TEST(Plan, CostsOfAnotherModelAreRefused) {
  testing::TempDir dir;
  const std::string costs = measured_costs(dir);
  ASSERT_FALSE(costs.empty());
  const auto [same, same_out] = testing::pipelab(fmt::format("plan {} --devices 2 --costs {}", dir.file("e.yaml"), costs));
  EXPECT_EQ(same, 0) << same_out;
  YAML::Node wider = YAML::Load(testing::kExperiment);
  std::vector<int> sizes = wider["model"]["sizes"].as<std::vector<int>>();
  sizes[1] *= 2;
  wider["model"]["sizes"] = sizes;
  YAML::Emitter out;
  out << wider;
  testing::write_text(dir.file("wider.yaml"), out.c_str());
  const auto [code, text] = testing::pipelab(fmt::format("plan {} --devices 2 --costs {}", dir.file("wider.yaml"), costs));
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find("measured on another model"), std::string::npos) << text;
  EXPECT_NE(text.find("--costs " + costs), std::string::npos) << text;
  EXPECT_NE(text.find("run.trace=true"), std::string::npos) << text;
}

}  // namespace
}  // namespace pipelab::plan_test
