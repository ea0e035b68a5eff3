/// pipelab plan FILE --devices N [--costs COSTS | --device-flops T ...] [--memory-cap GIB]
/// [--schemes a,b] [--async [--max-staleness V]] [--emit best.yaml] [--svg front.svg] [--explain]:
/// which pipeline to run for the experiment's model on N devices (docs/plan.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <set>

#include "core/config/registry.h"
#include "core/scheme/scheme.h"
#include "core/util/names.h"
#include "core/util/progress.h"
#include "tools/cli/cost_flags.h"
#include "tools/cli/load_experiment.h"
#include "tools/plan/baselines.h"
#include "tools/plan/plan_report.h"
#include "tools/plan/target_report.h"

namespace pipelab::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
/// The most devices a plan is searched for: every candidate is replayed action by action, and
/// a schedule over more devices than this takes longer to replay than a search may.
constexpr int kMaxPlanDevices = 1024;

/// The constraint no candidate met, and by how much: the exit-2 message.
std::string nothing_fits(const plan::PlanResult& result, const plan::PlanSpace& space) {
  double least = INFINITY;
  for (const plan::Candidate& c : result.lost) {
    const double need = c.simulated ? c.peak : c.static_bytes;
    if (c.lost.rfind("memory", 0) == 0 && need > 0) least = std::min(least, need);
  }
  if (std::isfinite(least)) {
    return fmt::format("no candidate fits {} devices of {}: the smallest needs {} on its fullest device, {} over the "
                       "cap. Fix: more devices, a larger --memory-cap, or a smaller run.batch_size",
                       space.devices, plan::bytes_text(space.memory_cap), plan::bytes_text(least),
                       plan::bytes_text(least - space.memory_cap));
  }
  // The schemes that gave no candidate at all, each with its reason.
  std::string why;
  std::set<std::string> refused;
  for (const plan::Candidate& c : result.lost) {
    if (c.stages == 0) {
      why += fmt::format("\n  {}: {}", c.label, c.lost);
      refused.insert(c.label);
    }
  }
  // Every scheme asked for refused the experiment: that is the answer, not the search.
  if (!why.empty() && refused.size() >= space.schemes.size()) {
    return fmt::format("--schemes {}: {} cannot run this experiment:{}\nFix: other --schemes (without --schemes, every "
                       "synchronous scheme that can is tried)",
                       fmt::join(space.schemes, ","), space.schemes.size() == 1 ? "the scheme" : "none of them", why);
  }
  // What to try: only what the search did not have already.
  std::vector<std::string> fixes;
  if (result.timed_out) fixes.push_back(fmt::format("a longer --time-limit than {:g} s", space.time_limit));
  fixes.push_back("other --schemes");
  if (!space.allow_idle) fixes.push_back("--allow-idle");
  if (space.max_staleness == 0) fixes.push_back("--async");
  return fmt::format("no candidate of {} on {} devices could be planned{}. Fix: {}{}", fmt::join(space.schemes, ", "),
                     space.devices, why.empty() ? " (--explain says why each lost)" : "", join(fixes, ", or "),
                     why.empty() ? "" : ". Schemes that gave none:" + why);
}

/// The winner in words: what it runs and what set it apart.
std::string why_line(const plan::PlanResult& r) {
  const plan::Candidate& best = r.ranked.front();
  std::string text = fmt::format("best: {} on {}{}: step {}, bubble {:.1f}%, peak {}", best.label,
                                 best.topology.text(), best.searched_cut ? ", its cut searched on its schedule" : "",
                                 plan::seconds_text(best.step), 100 * best.bubble, plan::bytes_text(best.peak));
  if (r.ranked.size() > 1) {
    const plan::Candidate& next = r.ranked[1];
    const double ahead = (next.step - best.step) / next.step;
    text += ahead >= 5e-4 ? fmt::format("; {:.1f}% faster than #2 ({})", 100 * ahead, next.label)
                          : fmt::format("; as fast as #2 ({}), ranked first as the simpler plan (fewer devices, "
                                        "stages or bytes)", next.label);
  }
  return text;
}

/// The command line of `pipelab plan`, read in one place.
struct PlanFlags {
  std::string file, schemes, emit, svg, json, preset = kNoPreset, codec, target;
  std::vector<std::string> sets, proxy_sets;
  int devices = 0, top = 10, max_staleness = 0;
  int64_t proxy_steps = 1000;
  double memory_cap = 0, device_memory = 0, time_limit = 10, compress_below = 0, tokens = 0;
  bool async = false, allow_idle = false, explain = false;
  TargetOptions target_options;  ///< --target, read
  std::string command;           ///< the command line as given, for the emitted file's header
  CostFlags cost;
  po::variables_map vm;
};

/// Reads and checks the flags; false for --help.
bool read_flags(const Args& args, PlanFlags& f) {
  po::options_description options("options");
  options.add_options()("file", po::value(&f.file)->required(), "experiment YAML file (model, optimizer, batch)")(
      "set", po::value(&f.sets)->composing(), "override a value of the file: --set run.batch_size=256 (repeatable)")(
      "preset", po::value(&f.preset), kPresetHelp)(
      "devices", po::value(&f.devices)->required(), "devices N to plan for (1 to 1024)")(
      "device-memory", po::value(&f.device_memory),
      "memory of each device, GiB (the cap unless --memory-cap; default: the --cluster's)")(
      "memory-cap", po::value(&f.memory_cap), "the most a plan may hold on one device, GiB (0: no cap)")(
      "schemes", po::value(&f.schemes),
      "schemes to consider, comma-separated (default: every synchronous schedule, single and dp)")(
      "async", "also consider the asynchronous schemes (PipeDream, 2BW, SpecTrain, ...)")(
      "max-staleness", po::value(&f.max_staleness),
      "with --async: the most weight versions a gradient may be stale by (default: any)")(
      "allow-idle", "candidates may leave devices idle (stages x replicas below N; `single` on one device)")(
      "compress-below", po::value(&f.compress_below),
      "on a link slower than this (Gbit/s), also try each pipeline with a codec on every boundary")(
      "codec", po::value(&f.codec),
      "with --compress-below: the codec, as flow YAML (default: the file's compression section, else {type: cast})")(
      "time-limit", po::value(&f.time_limit), "seconds for the search (default 10)")(
      "top", po::value(&f.top), "candidates ranked in the table (default 10)")(
      "emit", po::value(&f.emit), "write the best plan as an experiment file ready for `pipelab run`")(
      "overwrite", "with --emit: replace an existing file")(
      "svg", po::value(&f.svg), "write the time x memory Pareto front as SVG")(
      "json", po::value(&f.json), "write every ranked candidate as JSON (scheme section, partition, figures)")(
      "explain", "say why each other candidate lost (memory, bound, staleness, refused)")(
      "target", po::value(&f.target),
      "also rank the top plans by time to this target, as run.targets writes it: test_loss=2.0, test_acc=90 "
      "(steps from proxy runs on this CPU x the simulated step; docs/time-to-accuracy.md)")(
      "proxy-steps", po::value(&f.proxy_steps), "with --target: the most training steps of each proxy run (default 1000)")(
      "tokens", po::value(&f.tokens),
      "ragged text: the mean length of a step's sequences (tokens per row); each plan's step is costed at it "
      "against the costs' sequence length")(
      "proxy-set", po::value(&f.proxy_sets)->composing(),
      "with --target: override a value of every proxy run only: --proxy-set dataset.limit=4096 (repeatable)");
  add_cost_options(options, f.cost);
  add_input_options(options);
  po::positional_options_description positional;
  positional.add("file", 1);
  if (!parse(args,
             "pipelab plan FILE --devices N [--costs COSTS | --cluster NAME|FILE | --device-flops TFLOPS [--memory-bw GBS]\n"
             "             [--dtype T] [--profile shapes|measured] [--launch-us U] [--action-us A] | --time-blocks]\n"
             "             [--link-gbps G] [--link-latency-us L] [--host-gbps G] [--host-latency-us L] [--overlap-slowdown F]\n"
             "             [--device-memory GIB | --memory-cap GIB]\n"
             "             [--schemes a,b] [--async [--max-staleness V]] [--allow-idle] [--time-limit S]\n"
             "             [--compress-below G [--codec SPEC]] [--tokens L]\n"
             "             [--top K] [--emit best.yaml [--overwrite]] [--svg front.svg] [--json ranked.json] [--explain]\n"
             "             [--target METRIC=VALUE [--proxy-steps N] [--proxy-set key.path=value ...]]\n\n"
             "Searches the pipelines for the experiment's model on N devices: scheme, stages, replicas, virtual\n"
             "stages, micro-batches, recomputation or offload, and the partition, each replayed as `pipelab run` would run it\n"
             "(docs/plan.md). One device and pure data parallelism are candidates too:\n\n"
             "  pipelab plan exp.yaml --devices 8 --cluster h100_sxm --dtype bfloat16 --emit best.yaml\n\n"
             "With --target (and --async), the top plans are also ranked by time to the target: the steps\n"
             "each scheme family needs, counted exactly by short runs of its model scaled down on this CPU,\n"
             "times its simulated step (docs/time-to-accuracy.md). --emit then writes that ranking's winner.",
             options, positional, f.vm)) {
    return false;
  }
  f.async = f.vm.count("async") > 0;
  f.allow_idle = f.vm.count("allow-idle") > 0;
  f.explain = f.vm.count("explain") > 0;
  checked_flag("--devices", f.devices, 1, kMaxPlanDevices);
  check_output_file("--emit", f.emit);
  std::error_code exists;
  if (!f.emit.empty() && !f.vm.count("overwrite") && std::filesystem::exists(f.emit, exists)) {
    // An experiment file is hand-written work (the one being planned, say): never lost quietly.
    throw UsageError{fmt::format("--emit {}: the file exists. Fix: give another path, or add --overwrite to replace it",
                                 f.emit)};
  }
  if (f.vm.count("overwrite") && f.emit.empty()) throw UsageError{"--overwrite goes with --emit"};
  check_output_file("--svg", f.svg);
  check_output_file("--json", f.json);
  check_cost_flags(f.vm, f.cost);
  checked_flag("--device-memory", f.device_memory, 0, 1e6);
  checked_flag("--memory-cap", f.memory_cap, 0, 1e6);
  checked_flag("--time-limit", f.time_limit, 0.01, 86400);
  if (f.vm.count("tokens")) checked_flag("--tokens", f.tokens, 1, 1e9);
  checked_flag("--top", f.top, 1, 1000);
  if (f.vm.count("max-staleness") && !f.async) throw UsageError{"--max-staleness goes with --async"};
  if (f.vm.count("max-staleness")) checked_flag("--max-staleness", f.max_staleness, 0, 1e6);
  if (f.vm.count("codec") && !f.vm.count("compress-below")) throw UsageError{"--codec goes with --compress-below"};
  checked_flag("--compress-below", f.compress_below, 0, 1e9);
  for (const char* flag : {"proxy-steps", "proxy-set"}) {
    if (f.vm.count(flag) && !f.vm.count("target")) throw UsageError{fmt::format("--{} goes with --target", flag)};
  }
  checked_flag("--proxy-steps", f.proxy_steps, 1, 1e9);
  return true;
}

/// `--target METRIC=VALUE` as the run.targets section it stands for, checked as the file's
/// would be.
TargetOptions target_of(const std::string& text) {
  const size_t eq = text.find('=');
  const std::string metric = text.substr(0, eq);
  const std::vector<std::string> metrics{"test_acc", "train_acc", "test_mcc", "test_loss", "train_loss"};
  if (std::find(metrics.begin(), metrics.end(), metric) == metrics.end() || eq == std::string::npos) {
    throw UsageError{fmt::format("--target {}: not METRIC=VALUE with a metric of epochs.csv. Fix: one of {}, as "
                                 "--target test_loss=2.0 or --target test_acc=90",
                                 text, join(closest_first(metric, metrics), ", "))};
  }
  YAML::Node section;
  try {
    section[metric] = YAML::Load(text.substr(eq + 1)).as<double>();
  } catch (const YAML::Exception&) {
    throw UsageError{fmt::format("--target {}: '{}' is not a number. Fix: --target {}=0.5, say", text,
                                 text.substr(eq + 1), metric)};
  }
  const ConfigNode node(section, std::make_shared<ConfigSource>("--target " + text), "run.targets");
  return read_options<TargetOptions>(node);
}

/// The codecs `--compress-below` tries on every boundary: `--codec` on both directions (on
/// activations alone when it cannot code gradients, as AQ-SGD), else the file's section, else
/// a cast to bf16.
std::shared_ptr<const CompressionSection> codecs_of(const PlanFlags& f, const Experiment& e) {
  if (!f.vm.count("codec") && e.compression.any()) {
    auto out = std::make_shared<CompressionSection>(e.compression);
    out->where = CompressionSection::Where::All;
    return out;
  }
  YAML::Node spec;
  try {
    spec = YAML::Load(f.vm.count("codec") ? f.codec : "{type: cast}");
  } catch (const YAML::Exception& err) {
    throw UsageError{fmt::format("--codec {}: not YAML ({}). Fix: a codec in flow YAML, e.g. --codec "
                                 "'{{type: sort_quant, q: 6, s: 2}}'", f.codec, err.msg)};
  }
  // Read as the file's section would be, so a mistake names its key and the fix.
  const auto source = std::make_shared<ConfigSource>("--codec " + f.codec);
  const bool gradients = Registry<Codec>::get().create(ConfigNode(spec, source, "codec"))->refuses(true).empty();
  YAML::Node section;
  section["activations"] = spec;
  if (gradients) section["gradients"] = spec;
  return std::make_shared<CompressionSection>(read_compression(ConfigNode(section, source, "compression")));
}

/// What to search, from the flags, the experiment and where its costs come from.
plan::PlanSpace space_of(const PlanFlags& f, const Experiment& e, const sim::CostSource& source) {
  plan::PlanSpace space;
  space.schemes = f.vm.count("schemes") ? flag_list("--schemes", f.schemes)
                                        : plan::default_schemes(f.async, e.model->segment_token_work().has_value());
  if (f.vm.count("schemes") && space.schemes.empty()) {
    throw UsageError{"--schemes: an empty list. Fix: name the schemes, e.g. --schemes gpipe,zb_h1, or drop --schemes "
                     "for every synchronous one"};
  }
  const std::vector<std::string> registered = Registry<Scheme>::get().names();
  for (const std::string& name : space.schemes) {
    const size_t colon = name.find(':');
    if (colon != std::string::npos && Registry<Scheme>::get().find(name.substr(0, colon))) {
      throw UsageError{fmt::format("--schemes {}: plan takes scheme names only, and searches their options (chunks, "
                                   "virtual stages, replicas) itself; NAME:key=value is `pipelab simulate`'s form. Fix: "
                                   "--schemes {}",
                                   name, name.substr(0, colon))};
    }
    if (!Registry<Scheme>::get().find(name)) {
      throw UsageError{fmt::format("--schemes: no scheme is registered as '{}'. Fix: use one of: {}", name,
                                   join(closest_first(name, registered), ", "))};
    }
  }
  space.devices = f.devices;
  space.allow_idle = f.allow_idle;
  space.memory_cap = (f.memory_cap > 0      ? f.memory_cap
                      : f.device_memory > 0 ? f.device_memory
                                            : f.cost.cluster_memory_gib) *
                     kGiB;
  space.offload = source.link().host_gbps > 0;
  space.token_length = f.tokens;
  space.max_staleness = !f.async ? 0 : f.vm.count("max-staleness") ? f.max_staleness : 1 << 20;
  space.time_limit = f.time_limit;
  space.batch = static_cast<int>(e.run.batch_size);
  space.block_flops = source.block_flops();
  space.repartition = source.derived();
  if (!source.derived()) {
    // Measured costs are per stage: their partition stays (the file's counts, when it has them).
    space.measured_stages = static_cast<int>(source.file()->stages.size());
    const Balance& b = e.partition.balance;
    if (b.kind == Balance::Kind::Counts && static_cast<int>(b.counts.size()) == space.measured_stages) {
      space.fixed_balance = b.counts;
    }
  }
  space.top = f.top;
  space.rank_apart = f.vm.count("target") > 0;
  // One link joins every pair of devices: it is slower than the threshold for every boundary
  // or for none (0 Gbit/s is an infinite link).
  const double gbps = source.link().gbps;
  if (f.vm.count("compress-below") && gbps > 0 && gbps < f.compress_below) space.compress = codecs_of(f, e);
  return space;
}

/// The baselines' rows under the table: each unless it is among the top rows already.
std::vector<std::pair<std::string, plan::Candidate>> baseline_rows(const plan::Baselines& b) {
  std::vector<std::pair<std::string, plan::Candidate>> rows;
  for (const auto* base : {&b.single, &b.dp}) {
    if (*base && ((*base)->standing.rfind('#', 0) != 0 || (*base)->standing.find("below") != std::string::npos)) {
      rows.emplace_back(fmt::format("baseline ({})", (*base)->standing), (*base)->candidate);
    }
  }
  return rows;
}

/// --target: the proxy runs, the plans by time to the target and why; returns the winner's
/// index in `result.ranked` (the throughput winner's when none reached it) and, per ranked
/// candidate, its steps and time to the target (NaN: not proxied; inf: not reached).
size_t by_target(const PlanFlags& f, const plan::PlanResult& result, std::vector<double>& steps,
                 std::vector<double>& times) {
  plan::ProxyOptions o;
  o.target = f.target_options;
  o.steps = f.proxy_steps;
  o.sets = f.proxy_sets;
  const YAML::Node tree = experiment_tree(f.file, with_preset(f.sets, f.preset));
  const plan::TimeToTarget t = plan::proxy_runs(tree, f.file, result.ranked, f.top, o);
  times = plan::times_to_target(result.ranked, t);
  for (size_t i = 0; i < result.ranked.size(); ++i) {
    const int family = t.family_of[i];
    steps.push_back(family < 0                          ? NAN
                    : t.runs[family].reached.reached ? t.runs[family].reached.train_seconds
                                                       : INFINITY);
  }
  const std::vector<size_t> order = plan::target_order(result.ranked, times);
  fmt::print("\nby time to {} (steps: the plan's numerics on this CPU; time: steps x the simulated step):\n{}\n{}{}\n",
             plan::target_heading(t), plan::proxy_lines(t, f.proxy_steps),
             plan::target_table(result.ranked, t, times, order, f.top), plan::target_why(result.ranked, t, times, order));
  if (!f.async) {
    fmt::print("note: without --async every plan is synchronous: plans that cut the mini-batch alike need the same "
               "steps, and the rankings differ only where batch norm sees the parts\n");
  }
  return order.empty() || !std::isfinite(times[order.front()]) ? 0 : order.front();
}

/// The table, the winner, the front, and the files asked for.
void report(const PlanFlags& f, const Experiment& e, const plan::PlanSpace& space, const plan::PlanResult& result,
            const plan::Baselines& baselines, const std::string& costs) {
  if (f.explain) fmt::print("why the others lost:\n{}\n", plan::explanation(result));
  if (result.ranked.empty()) throw UserError(nothing_fits(result, space));
  fmt::print("{}\n{}\n", plan::ranked_table(result.ranked, f.top, baseline_rows(baselines)), why_line(result));
  if (!baselines.verdict.empty()) fmt::print("{}\n", baselines.verdict);
  // Where it runs decides an all-reduce's memory (docs/simulate.md, "Memory from shapes"):
  // the plan prices one process's; `pipelab launch`'s processes gather every member's.
  if (result.ranked.front().topology.pipelines > 1) {
    fmt::print("note: the winner all-reduces over {} pipelines; run as processes (`pipelab launch`), each "
               "all-reduce also holds 2 x {} + 1 gradients of a stage while it runs, which this peak does not count: "
               "`pipelab simulate FILE --executor processes` does (docs/simulate.md, \"Memory from shapes\")\n",
               result.ranked.front().topology.pipelines, result.ranked.front().topology.pipelines);
  }
  fmt::print("time x memory front (none is both faster and smaller):");
  for (const plan::Candidate* c : plan::pareto_front(result.ranked)) {
    fmt::print("\n  {} on {}: {}, {}", c->label, c->topology.text(), plan::seconds_text(c->step),
               plan::bytes_text(c->peak));
  }
  fmt::print("\n");
  std::vector<double> steps, times;
  const size_t chosen = !f.vm.count("target") ? 0 : by_target(f, result, steps, times);
  if (!f.json.empty()) write_output(f.json, plan::ranked_json(result.ranked, steps, times));
  if (!f.svg.empty()) {
    write_output(f.svg, plan::pareto_svg(result.ranked, fmt::format("{} on {} devices: step time against memory",
                                                                    e.model->type(), f.devices)));
  }
  if (!f.emit.empty()) {
    const std::string beside = std::filesystem::path(f.emit).parent_path().string();
    // The file with --set, --preset and --dtype's precision applied: the run that was priced.
    YAML::Node tree = experiment_tree(f.file, with_preset(f.sets, f.preset));
    YAML::Emitter out;
    out << plan::emitted_experiment(tree, f.file, result.ranked[chosen], beside.empty() ? "." : beside);
    write_output(f.emit, plan::emitted_header(result.ranked[chosen], f.command, costs) + out.c_str() + "\n");
  }
}

}  // namespace

int plan(const Args& args) {
  PlanFlags f;
  if (!read_flags(args, f)) return 0;
  f.command = "pipelab plan";
  for (const std::string& a : args) {
    f.command += a.find_first_of(" '\"") == std::string::npos ? " " + a : " '" + a + "'";
  }
  if (f.vm.count("target")) f.target_options = target_of(f.target);
  // --dtype is the precision the plan runs in: the experiment's run.amp and run.dtype, so that
  // what is priced is what the emitted file runs.
  if (f.vm.count("dtype")) {
    f.sets.insert(f.sets.end(), {"run.amp=" + amp_of_dtype(f.cost.dtype),
                                 std::string("run.dtype=") + (f.cost.dtype == "float64" ? "float64" : "float32")});
  }
  const Experiment e = load_experiment_or_first_cell(f.file, with_preset(f.sets, f.preset));
  apply_precision(f.vm, f.cost, e);
  f.cost.device.optimizer_states = sim::optimizer_states(*e.optimizer);
  const sim::CostSource source = cost_source(e, f.vm, f.cost.costs_file, f.cost.device);
  if (!source.costs_of_other_model().empty()) throw UsageError{source.costs_of_other_model()};
  if (f.vm.count("tokens")) check_mean_tokens(f.tokens, source, e.model->type());
  const plan::PlanSpace space = space_of(f, e, source);
  std::unique_ptr<Progress> progress;
  const plan::PlanResult result = plan::search(
      e, space,
      [&](const std::vector<int>& balance, double examples, const CompressionSection& compression) {
        return source.costs_for(balance, examples, compression);
      },
      sim::SimOptions{}, [&](int64_t done, int64_t total, double best) {
        if (!progress) progress = std::make_unique<Progress>("plan", total);
        progress->update(done, best > 0 ? "best " + plan::seconds_text(best) : "");
      });
  if (progress) progress->finish();
  const plan::Baselines baselines = plan::judge_baselines(
      e, space,
      [&](const std::vector<int>& balance, double examples, const CompressionSection& compression) {
        return source.costs_for(balance, examples, compression);
      },
      result);
  fmt::print("{}: model {}, mini-batch {} examples, {} devices{}\ncosts {}\n{}\n", f.file, e.model->type(),
             e.run.batch_size, f.devices, space.memory_cap > 0 ? " of at most " + plan::bytes_text(space.memory_cap) : "",
             source.describe(f.cost.dtype), source.checked());
  if (!f.cost.cluster_name.empty()) fmt::print("cluster {}: {}\n", f.cost.cluster, f.cost.cluster_name);
  if (f.vm.count("dtype")) {
    fmt::print("precision: --dtype {} plans the run with run.amp: {}{} (weights, gradients and optimizer state in {}, "
               "activations in {})\n",
               f.cost.dtype, amp_of_dtype(f.cost.dtype), f.emit.empty() ? "" : ", which the emitted file sets",
               f.cost.dtype == "float64" ? "float64" : "float32", f.cost.dtype);
  }
  if (f.vm.count("compress-below")) {
    fmt::print("{}\n", space.compress ? fmt::format("the link ({} Gbit/s) is slower than --compress-below {}: each "
                                                    "pipeline is tried as it is and with {} on every boundary",
                                                    source.link().gbps, f.compress_below,
                                                    plan::flow_text(space.compress->resolved()))
                                      : fmt::format("the link is not slower than --compress-below {}: no codec tried",
                                                    f.compress_below));
  }
  fmt::print("searched {} candidates in {:.2f} s ({} replayed){}\n\n", result.enumerated, result.seconds,
             result.simulated, result.timed_out ? "; the time limit cut the search short" : "");
  report(f, e, space, result, baselines, source.describe(f.cost.dtype));
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(plan, "which pipeline to run on N devices: scheme, stages, replicas, micro-batches, partition");
