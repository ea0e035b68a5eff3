/// The planner's candidates (tools/plan/candidates.h).
#include "tools/plan/candidates.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/config/registry.h"
#include "core/experiment/plan_request.h"
#include "core/model/block_costs.h"
#include "core/model/partition.h"
#include "core/optim/optimizer.h"
#include "core/schedule/update_gaps.h"

namespace pipelab::plan {
namespace {

/// What a scheme type's options let the planner vary, read from the option keys its options
/// struct declares (no list of scheme names, and no scheme built to find out): the key of its
/// micro-batch count, and whether it takes virtual stages, its own replicas, a recomputation
/// choice and sequence segments.
struct SchemeKnobs {
  YAML::Node base;              ///< the file's section for its own type, else {type}
  std::string micro_key;        ///< "chunks", "micro_batches" or "" (fixed)
  bool virtual_stages = false;  ///< takes `virtual_stages`
  bool own_replicas = false;    ///< takes `replicas` (data parallelism's copies)
  bool checkpoint = false;      ///< takes `checkpoint: never | except_last | always`
  bool segments = false;        ///< cuts sequences into `segments` (Seq1F1B, TeraPipe)
};

YAML::Node with(const YAML::Node& section, const std::string& key, const YAML::Node& value) {
  YAML::Node out = YAML::Clone(section);
  out[key] = value;
  return out;
}

SchemeKnobs knobs_of(const Experiment& e, const std::string& type) {
  SchemeKnobs k;
  k.base = type == e.scheme->type() ? YAML::Clone(e.scheme->resolved()) : YAML::Node(YAML::NodeType::Map);
  k.base["type"] = type;
  // The scheme's own option keys, as its options struct declares them (core/config/registry.h).
  const std::vector<std::string> keys = kind_option_keys("scheme", type).value_or(std::vector<std::string>{});
  const auto has = [&keys](const char* key) { return std::find(keys.begin(), keys.end(), key) != keys.end(); };
  for (const char* key : {"chunks", "micro_batches"}) {
    if (has(key)) {
      k.micro_key = key;
      break;
    }
  }
  k.virtual_stages = has("virtual_stages");
  k.own_replicas = has("replicas");
  k.checkpoint = has("checkpoint");
  k.segments = has("segments");
  return k;
}

/// The scheme sections to try for one type: each virtual-stage count and recomputation choice.
std::vector<YAML::Node> variants(const SchemeKnobs& k) {
  std::vector<YAML::Node> out{k.base};
  if (k.virtual_stages) {
    out.clear();
    for (int v : {1, 2, 4}) out.push_back(with(k.base, "virtual_stages", YAML::Node(v)));
  }
  if (k.segments) {
    std::vector<YAML::Node> each;
    for (const YAML::Node& s : out) {
      for (int n : {2, 4, 8}) each.push_back(with(s, "segments", YAML::Node(n)));
    }
    out = each;
  }
  if (k.checkpoint) {
    std::vector<YAML::Node> both;
    for (const YAML::Node& s : out) {
      for (const char* c : {"never", "except_last", "always"}) both.push_back(with(s, "checkpoint", YAML::Node(c)));
    }
    out = both;
  }
  return out;
}

/// "zb_h1 virtual_stages=2 chunks=8": the type and the options the planner chose.
std::string label_of(const YAML::Node& section, const SchemeKnobs& k) {
  std::string out = section["type"].as<std::string>();
  for (const char* key : {"virtual_stages", "checkpoint", "replicas"}) {
    if (section[key] && (std::string(key) != "virtual_stages" || k.virtual_stages)) {
      out += fmt::format(" {}={}", key, section[key].as<std::string>());
    }
  }
  if (!k.micro_key.empty()) out += fmt::format(" {}={}", k.micro_key, section[k.micro_key].as<std::string>());
  return out;
}

/// Micro-batch counts to try for a replica's share of `batch` examples: every count up to 256
/// that chunk semantics splits it into (ceil(batch / m) each, the last one smaller; a count
/// that would leave fewer chunks than m is not a count of its own).
std::vector<int> micro_choices(int batch) {
  std::vector<int> out;
  for (int m = 1; m <= std::min(batch, 256); ++m) {
    const int size = (batch + m - 1) / m;
    if (static_cast<int64_t>(size) * (m - 1) < batch) out.push_back(m);
  }
  return out;
}

}  // namespace

std::unique_ptr<Scheme> make_scheme(const YAML::Node& section) {
  static const auto source = std::make_shared<ConfigSource>("pipelab plan");
  return Registry<Scheme>::get().create(ConfigNode(section, source, "scheme"));
}

RunPlan compile_plan(const Experiment& e, const Scheme& scheme, const Candidate& c) {
  PlanRequest r = plan_request(e, c.stages);
  r.scheme = &scheme;
  // A scheme that sets its own copies (data parallelism) takes none from the partition.
  r.replicas = Replicas{scheme.replicas(1) == 1 ? c.replicas : 1, {}};
  r.compression = compression_of(c, e);
  if (!c.recompute.empty()) r.recompute = Recompute{Recompute::Kind::Stages, c.recompute};
  if (!c.offload.empty()) r.offload = Offload{Recompute{Recompute::Kind::Stages, c.offload}, c.offload_fraction, 1};
  return RunPlan::compile(r);
}

const CompressionSection& compression_of(const Candidate& c, const Experiment& e) {
  return c.compression ? *c.compression : e.compression;
}

namespace {

/// One scheme section the search tries, made once for every shape it is tried on (a search
/// of a large cluster tries each on thousands).
struct Made {
  std::shared_ptr<const YAML::Node> section;
  std::shared_ptr<const Scheme> scheme;  ///< null: the registry refuses the section
  std::string label;
  std::string refused;  ///< why, when it does
};

Made made_of(const YAML::Node& section, const SchemeKnobs& knobs) {
  Made m{std::make_shared<const YAML::Node>(section), nullptr, label_of(section, knobs), {}};
  try {
    m.scheme = make_scheme(section);
  } catch (const UserError& err) {
    m.refused = err.what();
  }
  return m;
}

/// The candidate `made` makes with `stages` model stages and `replicas` copies, as the run
/// plan compiles it; none when the scheme or the plan refuses that shape.
/// The file's optimizer over one small parameter: what a scheme's stage policies ask of it
/// (Scheme::optimizer_refused) before the planner ranks a plan whose file could not train.
std::unique_ptr<Optimizer> probe_optimizer(const Experiment& e) {
  return e.optimizer->make({at::zeros({2, 2}, at::kFloat).set_requires_grad(true)});
}

/// Keeps in `refused` the most telling refusal so far: one about the scheme and the model (a
/// sequence scheme on an MLP) over one about a shape the search tries (a stage count).
void keep_refusal(std::string& refused, const std::string& why) {
  const auto about_shape = [](const std::string& text) { return text.find("partition.stages") != std::string::npos; };
  if (refused.empty() || about_shape(refused) || !about_shape(why)) refused = why;
}

std::optional<Candidate> shape_of(const Experiment& e, const Made& made, const Optimizer& optimizer, int stages,
                                  int replicas, std::string& refused) {
  if (!made.scheme) {
    keep_refusal(refused, made.refused);
    return std::nullopt;
  }
  Candidate c;
  c.section = made.section;
  c.label = made.label;
  c.replicas = replicas;
  try {
    const std::shared_ptr<const Scheme>& scheme = made.scheme;
    c.scheme = scheme;
    c.stages = scheme->stages(stages);
    // What each stage's policy would refuse when the emitted file runs (XPipe without Adam).
    for (int s = 0; s < c.stages; ++s) {
      const std::string no = scheme->optimizer_refused(optimizer, s, c.stages);
      if (!no.empty()) throw UserError(no);
    }
    const RunPlan plan = compile_plan(e, *scheme, c);
    // The run's own check of the mini-batch (enough examples for every replica's micro-batches):
    // a plan the run would refuse is no candidate.
    plan.check_batch_size(e.run.batch_size);
    c.topology = topology_of(plan);
    c.replicas = plan.replicas();
    const StepShape step = plan.step(e.run.batch_size);
    c.flushed = step.flushed;
    c.micro_batches = step.micro_batches;
  } catch (const UserError& err) {
    keep_refusal(refused, err.what());
    return std::nullopt;
  }
  return c;
}

/// " codec=sort_quant": the codec a candidate of `--compress-below` carries, in its label.
std::string codec_label(const CompressionSection& section) {
  return " codec=" + (section.activations ? section.activations : section.gradients)->type();
}

/// `c`, and with `space.compress` set, `c` without compression and (when it has boundaries
/// the codec codes: the run plan says) `c` with the codec.
std::vector<Candidate> with_codecs(const Experiment& e, const PlanSpace& space, Candidate c) {
  if (!space.compress) return {std::move(c)};
  static const auto none = std::make_shared<const CompressionSection>();  // shared by every uncoded candidate
  Candidate coded = c;
  c.compression = none;
  std::vector<Candidate> out{std::move(c)};
  coded.compression = space.compress;
  try {
    compile_plan(e, *coded.scheme, coded);
    coded.label += codec_label(*space.compress);
    out.push_back(std::move(coded));
  } catch (const UserError&) {
    // One stage (no boundary), or a scheme that sends no gradient back to code.
  }
  return out;
}

}  // namespace

std::vector<Candidate> enumerate(const Experiment& e, const PlanSpace& space, std::vector<Candidate>& lost) {
  std::vector<Candidate> out;
  std::set<std::string> seen;
  // The time limit holds here too (a large cluster with idle devices allowed has many shapes).
  const auto start = std::chrono::steady_clock::now();
  const auto over = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > space.time_limit;
  };
  const int n = space.devices;
  const std::unique_ptr<Optimizer> optimizer = probe_optimizer(e);
  // Measured costs are for their own stages: no more can be cut.
  const int blocks = space.repartition ? static_cast<int>(space.block_flops.size()) : space.measured_stages;
  for (const std::string& type : space.schemes) {
    if (!Registry<Scheme>::get().find(type)) {
      Candidate c;
      c.label = type;
      c.stages = 0;  // the scheme itself, not one of its shapes
      c.lost = fmt::format("no scheme is registered as {}", type);
      lost.push_back(c);
      continue;
    }
    const SchemeKnobs knobs = knobs_of(e, type);
    const size_t before = out.size();
    std::string refused;  // the run plan's (or the scheme's) last word on a shape it refused
    for (const YAML::Node& variant : variants(knobs)) {
      std::map<std::pair<int, int>, Made> made;  // (replicas when the section holds them, m)
      for (int r = 1; r <= n && !over(); ++r) {
        if (!space.allow_idle && n % r != 0) continue;
        for (int per_device : {1, 2, 4}) {
          // Devices per pipeline: all the replica's share, or fewer when devices may idle;
          // never more stages than the model has blocks.
          for (int p = space.allow_idle ? 1 : n / r; p <= n / r && p * per_device <= blocks; ++p) {
            const int stages = p * per_device;
            for (int m : knobs.micro_key.empty() ? std::vector<int>{0} : micro_choices(space.batch / r)) {
              const auto key = std::make_pair(knobs.own_replicas ? r : 0, m);
              if (!made.count(key)) {
                const YAML::Node section = knobs.own_replicas ? with(variant, "replicas", YAML::Node(r)) : variant;
                made[key] = made_of(m ? with(section, knobs.micro_key, YAML::Node(m)) : YAML::Clone(section), knobs);
              }
              std::optional<Candidate> shaped = shape_of(e, made[key], *optimizer, stages, r, refused);
              if (!shaped) continue;  // a shape the scheme does not take (V-shapes on an odd count, ...)
              Candidate& c = *shaped;
              if (c.topology.devices > n || (!space.allow_idle && c.topology.devices != n)) continue;
              for (Candidate& v : with_codecs(e, space, std::move(c))) {
                const std::string key = fmt::format("{}|{}|{}|{}", v.label, v.stages, v.replicas, v.topology.devices);
                if (seen.insert(key).second) out.push_back(std::move(v));
              }
            }
          }
        }
      }
    }
    if (out.size() == before) {
      // Not one shape: the scheme, by name, and why (--explain and the final message).
      Candidate c;
      c.label = type;
      c.stages = 0;  // the scheme itself, not one of its shapes
      c.lost = over() ? fmt::format("the search's --time-limit ({} s) ran out before {}", space.time_limit, type)
               : refused.empty()
                   ? fmt::format("no shape of {} fits {} devices{} ({} blocks to cut)", type, n,
                                 space.allow_idle ? "" : " without leaving some idle (--allow-idle)", blocks)
                   : refused;
      lost.push_back(c);
    }
  }
  return out;
}

bool analytic(Candidate& c, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of) {
  try {
    if (!space.repartition && c.stages != space.measured_stages) {
      c.lost = fmt::format("the measured costs are for {} stages, not {} (derive costs to plan other partitions: "
                           "--device-flops)",
                           space.measured_stages, c.stages);
      return false;
    }
    if (c.balance.empty() && space.repartition) c.balance = balance_by_weight(with_floor(space.block_flops), c.stages);
    if (!space.repartition) c.balance = space.fixed_balance;
    const RunPlan plan = compile_plan(e, *c.scheme, c);
    const StepShape step = plan.step(space.batch, c.flushed ? c.micro_batches : 0);
    const sim::SimCosts costs = costs_of(c.balance, step.examples_per_micro_batch, compression_of(c, e));
    const std::vector<int>& placement = plan.placement();
    const size_t devices = static_cast<size_t>(plan.devices());
    std::vector<double> compute(devices, 0), held(devices, 0);
    std::vector<int> first(devices, plan.stages());  // the earliest pipeline stage each device holds
    // Every action a device runs takes its time on that device: each stage's forwards and
    // backwards (a recomputed forward and codecs included) and, flushed per mini-batch, its
    // ALLREDUCE before its one update (gradient_sync: replicas, a clip, tied weights).
    const bool syncs = c.flushed && plan.sync().always;
    // Ragged text (--tokens): every micro-batch computes its share of the costs' length, as
    // the replay costs it (tools/simulate/unit_scale.h).
    const double share =
        space.token_length > 0 && costs.sequence_length >= 1 ? space.token_length / costs.sequence_length : 1.0;
    for (size_t id = 0; id < placement.size(); ++id) {
      const int stage = static_cast<int>(id);
      const int p = plan.layout().replicated() ? plan.layout().position(stage) : stage;
      const size_t d = static_cast<size_t>(placement[id]);
      compute[d] += c.micro_batches * share *
                    (sim::compute_seconds(costs, plan, stage, ActionKind::Forward) +
                     sim::compute_seconds(costs, plan, stage, ActionKind::Backward));
      if (syncs) compute[d] += sim::collective_seconds(costs, plan, stage);
      first[d] = std::min(first[d], p);
      held[d] += sim::static_bytes(costs.stages.at(static_cast<size_t>(p)), plan.stage_memory(stage));
    }
    // A pipeline flushed per mini-batch starts empty: a device waits, before its first action,
    // for the first micro-batch's forwards through every stage ahead of its earliest one.
    c.bound = 0;
    for (size_t d = 0; d < devices; ++d) {
      double lead = 0;
      for (int s = 0; c.flushed && s < first[d]; ++s) {
        lead += costs.stages[static_cast<size_t>(s)].seconds_of(ActionKind::Forward) * share;
      }
      c.bound = std::max(c.bound, lead + compute[d]);
    }
    c.static_bytes = *std::max_element(held.begin(), held.end());
    return true;
  } catch (const UserError& err) {
    c.lost = err.what();
    return false;
  }
}

bool replay(Candidate& c, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
            const sim::SimOptions& options) {
  try {
    const RunPlan plan = compile_plan(e, *c.scheme, c);
    // The step `run` trains and `simulate` replays (a pipeline that runs on, long enough to
    // reach its steady state).
    const StepShape step = plan.step(space.batch, c.flushed ? c.micro_batches : 0);
    const sim::SimCosts costs = costs_of(c.balance, step.examples_per_micro_batch, compression_of(c, e));
    const sim::SimResult r = sim::simulate(plan, step, costs, options);
    c.simulated = true;
    c.replayed_micro_batches = r.units;
    c.step = r.step_seconds;
    // From the step the rank uses: a mini-batch per step (a running pipeline's steady state).
    c.samples_per_second = c.step > 0 ? space.batch / c.step : 0;
    c.bubble = r.bubble;
    c.bytes = r.bytes_per_step;
    c.peaks = r.peak_bytes;
    c.peaks_above_weights = r.peak_activation_bytes;
    for (size_t d = 0; d < r.gradient_bytes.size(); ++d) c.peaks_above_weights[d] += r.gradient_bytes[d];
    c.peak = r.peak_bytes.empty() ? 0 : *std::max_element(r.peak_bytes.begin(), r.peak_bytes.end());
    c.staleness = staleness(r.schedule);
    return true;
  } catch (const UserError& err) {
    c.lost = err.what();
    return false;
  }
}

int staleness(const Schedule& s) {
  const std::vector<int> gaps = update_gaps(s);
  return gaps.empty() ? 0 : gaps.front();
}

}  // namespace pipelab::plan
