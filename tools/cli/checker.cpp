/// The runs and the numerics of `pipelab check scheme` (tools/cli/checker.h).
#include "tools/cli/checker.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <fmt/ranges.h>

#include "core/config/registry.h"
#include "core/io/atomic_file.h"
#include "core/records/run_record.h"
#include "core/run/runner.h"
#include "core/schedule/update_gaps.h"
#include "core/util/error.h"

namespace fs = std::filesystem;

namespace pipelab::cli {

std::string check_experiment_yaml(const std::string& scheme, int stages, const std::string& dtype) {
  return fmt::format(R"(
model:     {{type: mlp, sizes: [12, 24, 24, 24, 24, 4], dropout: 0.1}}
dataset:   {{type: synthetic, samples: 64, test_samples: 32, shape: [12], classes: 4}}
partition: {{stages: {}}}
scheme:    {}
optimizer: {{type: sgd, lr: 0.05, momentum: 0.9}}
run:       {{epochs: 2, batch_size: 16, seed: 3, threads: 1, progress: false, dtype: {}}}
)",
                     stages, scheme, dtype);
}

Checker::Checker(std::string scheme, std::vector<std::string> sets, std::string pipelab)
    : scheme_(std::move(scheme)), sets_(std::move(sets)), pipelab_(std::move(pipelab)) {
  char pattern[] = "/tmp/pipelab-check-XXXXXX";
  if (!::mkdtemp(pattern)) throw WriteError("cannot make a temporary folder under /tmp");
  dir_ = pattern;
}

Checker::~Checker() {
  std::error_code e;
  fs::remove_all(dir_, e);
}

CheckRun Checker::train(const std::string& name, int stages, std::vector<std::string> extra, const std::string& dtype,
                        const std::string& scheme) {
  const std::string file = write(name, stages, dtype, scheme);
  if (scheme == scheme_) extra.insert(extra.begin(), sets_.begin(), sets_.end());  // not for `single`
  extra.push_back("run.output=" + dir_ + "/" + name);
  Experiment e = Experiment::load(file, extra);
  RunnerOptions o;
  o.overwrite = true;
  o.quiet = true;
  o.summary = false;
  Runner runner(e, o);
  runner.run();
  CheckRun out;
  out.dir = dir_ + "/" + name;
  out.stages = runner.pipeline_stages();
  out.weights = weights(name);
  const std::vector<Stage*> all = runner.stages();
  for (int p = 0; p < runner.pipeline_stages() && p < static_cast<int>(all.size()); ++p) {
    for (const auto& kv : all[static_cast<size_t>(p)]->module().named_parameters()) out.stage_of[kv.key()] = p;
  }
  // The order a long run keeps (a pipeline that runs on reaches its steady state).
  const RunPlan& plan = runner.plan();
  out.update_gaps = update_gaps(plan.program(plan.run_units(e.run.batch_size, 8 * std::max(1, plan.devices()))));
  return out;
}

int Checker::command(const std::string& args, const std::string& log) const {
  return std::system(fmt::format("OMP_NUM_THREADS=1 '{}' {} > '{}/{}.log' 2>&1", pipelab_, args, dir_, log).c_str());
}

std::string Checker::write(const std::string& name, int stages, const std::string& dtype,
                           const std::string& scheme) const {
  const std::string file = dir_ + "/" + name + ".yaml";
  write_file_atomic(file, check_experiment_yaml(scheme, stages, dtype));
  return file;
}

TensorDict Checker::weights(const std::string& name) const {
  return load_tensor_dict(dir_ + "/" + name + "/checkpoints/final.pt");
}

std::string Checker::sets_args() const {
  std::string out;
  for (const std::string& s : sets_) out += fmt::format(" --set '{}'", s);
  return out;
}

double max_difference(const TensorDict& a, const TensorDict& b) {
  if (a.size() != b.size()) return INFINITY;
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || !a[i].second.sizes().equals(b[i].second.sizes())) return INFINITY;
    most = std::max(most, (a[i].second.to(at::kDouble) - b[i].second.to(at::kDouble)).abs().max().item<double>());
  }
  return most;
}

std::string verdict(double difference) {
  return difference == 0 ? "ok (bitwise)" : fmt::format("FAILED (max |difference| {:.3g})", difference);
}

namespace {

/// float64 weights of a step's worth of updates agree to this where the arithmetic is the
/// same up to the order of its sums.
constexpr double kFloat64Tolerance = 1e-9;
/// Steps the search for the first difference looks at (two epochs of four).
constexpr int kSteps = 8;

/// The checked scheme's micro-batch count set to 4 (`chunks` or `micro_batches`), unless the
/// user set it; nothing for a scheme without one.
std::vector<std::string> several_micro_batches(const Checker& c, const std::string& type) {
  const std::optional<std::vector<std::string>> keys = kind_option_keys("scheme", type);
  if (!keys) return {};
  for (const char* key : {"chunks", "micro_batches"}) {
    if (std::find(keys->begin(), keys->end(), key) == keys->end()) continue;
    const std::string path = std::string("scheme.") + key;
    const bool given = std::any_of(c.sets().begin(), c.sets().end(), [&](const std::string& s) { return s.rfind(path + "=", 0) == 0; });
    return given ? std::vector<std::string>{} : std::vector<std::string>{path + "=4"};
  }
  return {};
}

/// The stages whose weights differ (over the tolerance) between `a` and `b`.
std::vector<int> differing_stages(const CheckRun& a, const TensorDict& b) {
  std::vector<int> out;
  for (size_t i = 0; i < a.weights.size() && i < b.size(); ++i) {
    const double d = (a.weights[i].second.to(at::kDouble) - b[i].second.to(at::kDouble)).abs().max().item<double>();
    const auto it = a.stage_of.find(a.weights[i].first);
    if (d > kFloat64Tolerance && it != a.stage_of.end() && std::find(out.begin(), out.end(), it->second) == out.end()) {
      out.push_back(it->second);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The first step after which the scheme's weights differ from `single`'s, and where.
std::string first_divergence(Checker& c, int stages, const std::vector<std::string>& extra) try {
  for (int step = 1; step <= kSteps; ++step) {
    const std::string max_steps = fmt::format("run.max_steps={}", step);
    std::vector<std::string> with = extra;
    with.push_back(max_steps);
    const CheckRun run = c.train(fmt::format("first{}_{}", stages, step), stages, with, "float64", c.scheme());
    const CheckRun one = c.train(fmt::format("single{}_{}", stages, step), 1,
                                 {"run.executor=sequential", "model.dropout=0", max_steps}, "float64", "{type: single}");
    const std::vector<int> where = differing_stages(run, one.weights);
    if (!where.empty()) {
      return fmt::format("first after step {}, in the weights of stage{} {}", step, where.size() == 1 ? "" : "s",
                         fmt::join(where, ", "));
    }
  }
  return "only after the first steps";
} catch (const UserError& e) {
  return fmt::format("the first step not searched: {}", e.what());
}

/// A synchronous scheme at `stages` stages with several micro-batches: `single`'s weights.
void check_synchronous(Checker& c, Report& report, int stages, const std::string& type, const TensorDict& single) {
  std::vector<std::string> extra{"run.executor=sequential", "model.dropout=0"};
  const std::vector<std::string> micro = several_micro_batches(c, type);
  extra.insert(extra.end(), micro.begin(), micro.end());
  const std::string what = fmt::format("{} stage{} vs single (float64{})", stages, stages == 1 ? "" : "s",
                                       micro.empty() ? "" : ", 4 micro-batches");
  CheckRun run;
  try {
    run = c.train(fmt::format("sync{}", stages), stages, extra, "float64", c.scheme());
  } catch (const UserError& e) {
    report.line(what, fmt::format("FAILED (the run refused: {})", e.what()));
    return;
  }
  const double d = max_difference(run.weights, single);
  const std::string ran = run.stages == stages ? "" : fmt::format("; the scheme ran {} stage{}", run.stages, run.stages == 1 ? "" : "s");
  if (d <= kFloat64Tolerance) {
    report.line(what, fmt::format("ok (max |difference| {:.3g}{})", d, ran));
    return;
  }
  report.line(what, fmt::format("FAILED (max |difference| {:.3g}; {}): the scheme says it is synchronous "
                                "(Scheme::numerics), so its step must compute single's update on the same mini-batch",
                                d, first_divergence(c, stages, extra)));
}

/// An asynchronous scheme at `stages` stages: the weight versions its stages' policies
/// report (stages.csv's forward_gap and backward_gap) within its schedule's update gaps
/// and its forward lag.
void check_staleness(Checker& c, Report& report, int stages, int lag) {
  const std::string what = fmt::format("{} stages: staleness within its schedule", stages);
  CheckRun run;
  try {
    run = c.train(fmt::format("async{}", stages), stages, {"run.executor=sequential"}, "float32", c.scheme());
  } catch (const UserError& e) {
    report.line(what, fmt::format("FAILED (the run refused: {})", e.what()));
    return;
  }
  std::map<int, double> most;  // stage -> the stalest gradient its policy reported
  for_each_stage_metric(run.dir + "/metrics/stages.csv", [&](int stage, const std::string& metric, double value) {
    if (metric == "forward_gap" || metric == "backward_gap") most[stage] = std::max(most[stage], value);
  });
  if (most.empty()) {
    report.line(what, "note: its policy reports no weight versions (core/scheme/staleness.h): not checked");
    return;
  }
  for (const auto& [stage, gap] : most) {
    const int allowed = (static_cast<size_t>(stage) < run.update_gaps.size() ? run.update_gaps[static_cast<size_t>(stage)] : 0) + lag;
    if (gap > allowed) {
      report.line(what, fmt::format("FAILED (stage {}'s gradients are {:g} versions stale, and its schedule allows {} "
                                    "({} updates between a forward and its backward, forward lag {}): it applies "
                                    "updates its schedule does not have, or reads older weights than it declares "
                                    "(Scheme::forward_lag)",
                                    stage, gap, allowed, allowed - lag, lag));
      return;
    }
  }
  std::vector<std::string> shown;
  for (const auto& [stage, gap] : most) shown.push_back(fmt::format("{:g}", gap));
  report.line(what, fmt::format("ok (at most {} versions by stage)", fmt::join(shown, "/")));
}

}  // namespace

void check_numerics(Checker& c, const Scheme& declared, const std::vector<int>& stages, Report& report) {
  const std::string& type = declared.type();
  const Numerics numerics = declared.numerics();
  const TensorDict single =
      c.train("single_sync", 1, {"run.executor=sequential", "model.dropout=0"}, "float64", "{type: single}").weights;
  if (std::find(stages.begin(), stages.end(), 1) != stages.end() && numerics != Numerics::Synchronous) {
    const double one = max_difference(
        c.train("one", 1, {"run.executor=sequential", "model.dropout=0"}, "float64", c.scheme()).weights, single);
    report.line("1 stage vs single (float64)",
                one <= kFloat64Tolerance
                    ? fmt::format("ok (max |difference| {:.3g})", one)
                    : fmt::format("note: differs by {:.3g} (fine for a rule that differs at one stage)", one));
  }
  if (numerics == Numerics::Other) {
    report.line("numerics", "note: another algorithm (Scheme::numerics: other): not compared with single");
    return;
  }
  for (const int n : stages) {
    if (numerics == Numerics::Asynchronous && n > 1) check_staleness(c, report, n, declared.forward_lag());
    if (numerics == Numerics::Synchronous) check_synchronous(c, report, n, type, single);
  }
}

}  // namespace pipelab::cli
