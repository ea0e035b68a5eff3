/// Proxy runs of `pipelab plan --target` (tools/plan/proxy_runs.h).
#include "tools/plan/proxy_runs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>

#include "core/config/config_node.h"
#include "core/model/meta_device.h"
#include "core/records/run_record.h"
#include "core/run/runner.h"
#include "core/scheme/scheme.h"
#include "core/util/error.h"
#include "core/util/memory_size.h"
#include "tools/plan/plan_report.h"
#include "tools/report/csv.h"
#include "tools/simulate/block_memory.h"
#include "tools/simulate/cache_key.h"

namespace pipelab::plan {
namespace {

namespace fs = std::filesystem;

/// Bumped whenever what a proxy experiment holds, or how its result is read, changes.
constexpr int kProxyFormat = 1;

bool synchronous(const Candidate& c) {
  // A codec on the boundaries changes what the step computes: such a plan is its own family.
  const bool coded = c.compression && c.compression->any();
  return c.scheme->numerics() == Numerics::Synchronous && !coded;
}

/// The parts a synchronous plan's mini-batch is cut into (replicas x micro-batches): the
/// examples a batch norm's statistics see. Plans cut alike compute the same updates; cut
/// otherwise, a model with batch norm trains differently (the Fashion-MNIST MLP of
/// docs/time-to-accuracy.md reaches 79% in 184 steps whole, in 167 in 2 parts, within the
/// first epoch's 156 in 4).
int parts(const Candidate& c) { return c.replicas * c.micro_batches; }

std::string family_label(const Candidate& c) {
  if (synchronous(c)) {
    return parts(c) == 1 ? "synchronous, the mini-batch whole"
                         : fmt::format("synchronous, the mini-batch in {} parts", parts(c));
  }
  return fmt::format("{} on {} stage{}{}", c.label, c.stages, c.stages == 1 ? "" : "s",
                     c.replicas > 1 ? fmt::format(" x {} replicas", c.replicas) : "");
}

std::string text_of(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A metrics CSV of the proxy's folder, header and rows.
std::vector<std::vector<std::string>> rows_of(const std::string& dir, const std::string& name) {
  const fs::path path = fs::path(dir) / name;
  std::vector<std::vector<std::string>> rows = tools::parse_csv(text_of(path), path.string());
  if (rows.empty()) throw UserError(fmt::format("{}: empty; delete {} and plan again", path.string(), dir));
  return rows;
}

double number_or_nan(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' ? v : std::nan("");
}

/// The proxy's epochs, each with its training steps in place of its training seconds (so
/// that time_to_targets() counts steps), read from metrics/epochs.csv and steps.csv.
std::vector<EpochMetrics> epochs_in_steps(const std::string& dir, int64_t& steps_run) {
  std::map<int, int64_t> steps;  // per epoch
  const auto step_rows = rows_of(dir, "metrics/steps.csv");
  for (size_t i = 1; i < step_rows.size(); ++i) {
    if (step_rows[i].size() > 1) ++steps[static_cast<int>(number_or_nan(step_rows[i][1]))];
  }
  const auto rows = rows_of(dir, "metrics/epochs.csv");
  const std::vector<std::string>& header = rows.front();
  std::vector<EpochMetrics> history;
  steps_run = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    EpochMetrics m;
    for (size_t col = 0; col < header.size() && col < rows[i].size(); ++col) {
      if (header[col] == "epoch") m.epoch = static_cast<int>(number_or_nan(rows[i][col]));
      for (const auto& [name, field] : epoch_fields()) {
        if (header[col] == name) m.*field = number_or_nan(rows[i][col]);
      }
    }
    m.train_seconds = static_cast<double>(steps[m.epoch]);
    m.simulated_seconds = std::nan("");
    steps_run += steps[m.epoch];
    history.push_back(m);
  }
  return history;
}

/// The value of the target's metric at the proxy's last evaluation.
double last_value(const std::vector<EpochMetrics>& history, const std::string& metric) {
  if (history.empty()) return std::nan("");
  for (const auto& [name, field] : epoch_fields()) {
    if (name == metric) return history.back().*field;
  }
  return std::nan("");
}

/// Where the proxy of `tree` is kept: a digest of everything it depends on (the experiment,
/// the files it names, the data folder it may read, this build).
std::string cache_dir_of(const YAML::Node& tree) {
  std::string text = fmt::format("proxy {};", kProxyFormat);
  text += YAML::Dump(tree);
  sim::fingerprint(tree, text);
  if (const char* data = std::getenv("PIPELAB_DATA_DIR"); data && *data) text += std::string("data ") + data;
  text += sim::build_fingerprint();
  return (fs::path(sim::cache_folder()) / "proxy" / fmt::format("{:016x}", sim::fnv1a(text))).string();
}

/// The proxy's runner, built (data read, stages made) but not run; null with `refused` set
/// when the plan cannot run as the file stands (XPipe's prediction without Adam's moments,
/// say): its time to the target is then unknown, and the report says why.
std::unique_ptr<Runner> build_runner(Experiment& e, std::string& refused) {
  RunnerOptions ro;
  ro.quiet = true;
  ro.summary = false;
  // An interrupted proxy (Ctrl-C in a long one) continues where it stopped.
  ro.resume = true;
  try {
    return std::make_unique<Runner>(e, ro);
  } catch (const UserError& err) {
    refused = err.what();
    return nullptr;
  }
}

/// Trains one proxy; false (with `refused`) when it cannot run. A scheme that never flushes
/// cannot stop at a step count: its budget is whole epochs, as many as cover it.
bool train_proxy(YAML::Node tree, const std::string& file, const std::string& family, bool stops_at_steps,
                 std::string& refused) {
  const auto source = std::make_shared<ConfigSource>(file);
  if (!stops_at_steps) {
    const int64_t budget = tree["run"]["max_steps"].as<int64_t>();
    tree["run"].remove("max_steps");
    Experiment probe = Experiment::from_tree(YAML::Clone(tree), source, "proxy: " + family);
    const std::unique_ptr<Runner> counted = build_runner(probe, refused);
    if (!counted) return false;
    const int64_t per_epoch = std::max<int64_t>(1, counted->data().train->size() / probe.run.batch_size);
    tree["run"]["epochs"] = std::min<int64_t>(probe.run.epochs, (budget + per_epoch - 1) / per_epoch);
  }
  Experiment e = Experiment::from_tree(tree, source, "proxy: " + family);
  const std::unique_ptr<Runner> runner = build_runner(e, refused);
  if (!runner) return false;
  runner->run();
  return true;
}

/// Why the proxy of `tree` cannot train on this machine ("" when it can). Its model is
/// narrowed but its data is the file's (the target is in its units), and a language model's
/// log-probabilities over a large vocabulary and long sequences can outgrow this machine's
/// memory, which the allocator or the kernel would report by ending the plan without a word.
/// A mini-batch's kept activations are counted from shapes on the meta device.
std::string too_large_here(const YAML::Node& tree, const std::string& file) {
  double bytes = 0;
  std::string data;
  try {
    const Experiment e = Experiment::from_tree(YAML::Clone(tree), std::make_shared<ConfigSource>(file), "proxy");
    const DataSpec spec = e.dataset->load(e.data_context()).spec;
    const ModelDef def = e.model->define(spec);
    const sim::BlockMemory m = sim::measure_block_memory(def, spec, static_cast<uint64_t>(e.run.seed), nullptr, 2,
                                                         /*meta=*/true);
    for (const double b : m.retained_per_example) bytes += b * static_cast<double>(e.run.batch_size);
    data = fmt::format("examples of shape {}{}", shape_text(spec.input_shape),
                       spec.target_shape.empty() ? "" : fmt::format(", {} classes at each position", spec.classes));
  } catch (const std::exception&) {
    return "";  // the run itself says what is wrong, or measures what the meta device cannot
  }
  const std::string problem = memory_problem(bytes);
  if (problem.empty()) return "";
  return fmt::format("a mini-batch of its run on this CPU keeps {} of activations ({}, as the file has them: the "
                     "target is in their units), which {}. Fix: --proxy-set run.batch_size=N (fewer examples a "
                     "step), a shorter or smaller dataset through --proxy-set, or plan without --target",
                     format_bytes(bytes), data, problem);
}

/// The model's parameters at the file's widths, counted on the meta device (0 where the model
/// cannot be made: the proxy runs then say why).
double full_width_parameters(const YAML::Node& root, const std::string& file) {
  try {
    const Experiment e = Experiment::from_tree(YAML::Clone(root), std::make_shared<ConfigSource>(file), "proxy");
    const ModelDef def = e.model->define(e.dataset->load(e.data_context()).spec);
    ProfileBlocks build(def, static_cast<uint64_t>(e.run.seed), /*meta=*/true);
    double parameters = 0;
    for (size_t i = 0; i < def.blocks.size(); ++i) parameters += static_cast<double>(count_parameters(*build(i).module.ptr()));
    return parameters;
  } catch (const std::exception&) {
    return 0;
  }
}

/// Trains (or finds) one family's proxy.
ProxyRun run_proxy(YAML::Node tree, const std::string& file, const std::string& family, bool stops_at_steps,
                   const ProxyOptions& o) {
  ProxyRun r;
  r.family = family;
  // The digest is of the experiment as proxy_experiment() made it, budget included.
  r.dir = cache_dir_of(tree);
  tree["run"]["output"] = r.dir;
  r.cached = RunRecord::finished(r.dir);
  if (!r.cached) r.refused = too_large_here(tree, file);
  if (!r.cached && (!r.refused.empty() || !train_proxy(tree, file, family, stops_at_steps, r.refused))) {
    r.reached = time_to_targets(o.target, {}).front();
    return r;
  }
  const nlohmann::json summary = nlohmann::json::parse(text_of(fs::path(r.dir) / "summary.json"), nullptr, false);
  r.status = summary.is_object() && summary.contains("status") && summary["status"].is_string()
                 ? summary["status"].get<std::string>()
                 : "finished";
  const std::vector<EpochMetrics> history = epochs_in_steps(r.dir, r.steps_run);
  r.reached = time_to_targets(o.target, history).front();
  r.last_value = last_value(history, r.reached.metric);
  return r;
}

}  // namespace

std::string family_key(const Candidate& c) {
  if (synchronous(c)) return fmt::format("synchronous; parts {}", parts(c));
  std::string key = fmt::format("{}; stages {}; replicas {}", flow_text(*c.section), c.stages, c.replicas);
  if (c.compression && c.compression->any()) key += "; " + flow_text(c.compression->resolved());
  return key;
}

namespace {

/// A proxy that --proxy-set makes unreadable is the flag's mistake: named as the flag, not as
/// the file's key the proxy's tree holds it under.
void check_proxy_sets(const YAML::Node& before, const YAML::Node& after, const std::string& file,
                      const std::vector<std::string>& sets) {
  const auto refusal = [&file](const YAML::Node& tree) -> std::string {
    try {
      (void)Experiment::from_tree(YAML::Clone(tree), std::make_shared<ConfigSource>(file), "proxy");
      return "";
    } catch (const UserError& e) {
      return e.what();
    }
  };
  const std::string with = refusal(after);
  if (with.empty() || !refusal(before).empty()) return;
  throw UserError(fmt::format("--proxy-set {}: the proxy runs' experiment then reads: {}", fmt::join(sets, " --proxy-set "),
                              with));
}

}  // namespace

YAML::Node proxy_experiment(YAML::Node root, const std::string& file, const Candidate& c, const ProxyOptions& o) {
  Candidate p = c;
  if (synchronous(c) && parts(c) == 1) {
    // A synchronous plan of whole mini-batches computes `single`'s updates: one device
    // stands for them all.
    p.section = std::make_shared<const YAML::Node>(YAML::Load("{type: single}"));
    p.stages = p.replicas = 1;
    p.balance = {std::accumulate(c.balance.begin(), c.balance.end(), 0)};
  }
  // Recomputation and offload change where the memory goes, not the numbers.
  p.recompute.clear();
  p.offload.clear();
  const bool had_mini = root["presets"] && root["presets"]["cpu-mini"];
  const std::string folder = fs::path(file).parent_path().string();
  root = emitted_experiment(root, file, p, folder.empty() ? "." : folder);
  if (!had_mini) root["presets"].remove("cpu-mini");
  if (root["presets"] && root["presets"].size() == 0) root.remove("presets");
  root["partition"].remove("recompute");
  root["partition"].remove("offload");
  // On this CPU, deterministically, cut at the budget; nothing but the metrics kept.
  const auto set = [&root, &file](const std::string& path, const YAML::Node& value) {
    set_key_path(root, path, value, "proxy run: " + path, file);
  };
  // Narrower where the model is large, never another task: a smaller vocabulary would change
  // what the loss measures, and the target is in the file's units.
  if (o.narrow) {
    for (const auto& kv : miniature_model(root, /*vocabulary=*/false)) set(kv.first.as<std::string>(), kv.second);
  }
  set("run.devices", YAML::Load("[cpu]"));
  set("run.amp", YAML::Node("none"));
  set("run.cuda_graphs", YAML::Node(false));
  set("run.channels_last", YAML::Node(false));
  set("run.trace", YAML::Node(false));
  set("run.progress", YAML::Node(false));
  set("run.checkpoint_every", YAML::Node(0));
  set("run.executor", YAML::Load("{type: sequential}"));
  const int64_t own = root["run"] && root["run"]["max_steps"] ? root["run"]["max_steps"].as<int64_t>() : 0;
  set("run.max_steps", YAML::Node(own > 0 ? std::min(own, o.steps) : o.steps));
  if (!o.sets.empty()) {
    const YAML::Node before = YAML::Clone(root);
    ConfigSource source(file);
    apply_overrides(root, o.sets, source);
    check_proxy_sets(before, root, file, o.sets);
  }
  return root;
}

TimeToTarget proxy_runs(const YAML::Node& root, const std::string& file, const std::vector<Candidate>& ranked, int top,
                        const ProxyOptions& options) {
  TimeToTarget out;
  ProxyOptions o = options;
  o.narrow = full_width_parameters(root, file) > kProxyFullWidthParameters;
  std::vector<std::string> keys;
  std::vector<size_t> first;  // per family, its best-ranked candidate
  for (size_t i = 0; i < ranked.size(); ++i) {
    // Past the top rows, only the synchronous plans: a proxy per way of cutting the
    // mini-batch times them all, and they are the baseline every asynchronous plan is
    // weighed against.
    if (static_cast<int>(i) >= top && !synchronous(ranked[i])) {
      out.family_of.push_back(-1);
      continue;
    }
    const std::string key = family_key(ranked[i]);
    auto at = std::find(keys.begin(), keys.end(), key);
    if (at == keys.end()) {
      keys.push_back(key);
      first.push_back(i);
      at = keys.end() - 1;
    }
    out.family_of.push_back(static_cast<int>(at - keys.begin()));
  }
  for (size_t f = 0; f < keys.size(); ++f) {
    const Candidate& c = ranked[first[f]];
    const std::string family = family_label(c);
    if (o.progress) {
      fmt::print(stderr, "proxy {}/{}: {}, up to {} steps on this CPU\n", f + 1, keys.size(), family, o.steps);
    }
    const bool stops_at_steps = synchronous(c) || c.scheme->span() != Span::Run;
    out.runs.push_back(run_proxy(proxy_experiment(YAML::Clone(root), file, c, o), file, family, stops_at_steps, o));
  }
  // A reason every family shares is the file's (its data cannot be read, say), not a plan's.
  if (!out.runs.empty() && std::all_of(out.runs.begin(), out.runs.end(), [&](const ProxyRun& r) {
        return !r.refused.empty() && r.refused == out.runs.front().refused;
      })) {
    throw UserError("--target: no proxy run could start: " + out.runs.front().refused);
  }
  return out;
}

std::vector<double> times_to_target(const std::vector<Candidate>& ranked, const TimeToTarget& t) {
  std::vector<double> out;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const int f = i < t.family_of.size() ? t.family_of[i] : -1;
    if (f < 0 || !t.runs[f].refused.empty()) {
      out.push_back(std::nan(""));
    } else {
      const TargetReached& r = t.runs[f].reached;
      out.push_back(r.reached ? r.train_seconds * ranked[i].step : INFINITY);
    }
  }
  return out;
}

}  // namespace pipelab::plan
