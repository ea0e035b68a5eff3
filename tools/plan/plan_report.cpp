/// What `pipelab plan` shows and writes (tools/plan/plan_report.h).
#include "tools/plan/plan_report.h"

#include "core/io/json.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/config/registry.h"
#include "core/config/yaml_file.h"
#include "core/experiment/input_paths.h"
#include "core/model/model.h"
#include "core/util/provenance.h"
#include "tools/report/svg_plot.h"

namespace pipelab::plan {
namespace fs = std::filesystem;
namespace {

/// "memory", "bound", ... : the word before the reason's colon, or "refused" for the plan's
/// own messages.
std::string reason_kind(const std::string& lost) {
  for (const char* kind : {"memory", "bound", "staleness", "not replayed"}) {
    if (lost.rfind(kind, 0) == 0) return kind;
  }
  return "refused";
}

}  // namespace

std::string flow_text(const YAML::Node& n) {
  YAML::Emitter out;
  out << YAML::Flow << n;
  return out.c_str();
}

namespace {

std::string table_row(const std::string& rank, const Candidate& c) {
  if (!c.simulated) {
    return fmt::format("| {} | {} | {} | {} | | | | | {} | | |\n", rank, c.label, c.topology.devices, c.topology.cell(),
                       c.static_bytes > 0 ? bytes_text(c.static_bytes) + " before activations" : "");
  }
  return fmt::format("| {} | {} | {} | {} | {}{} | {} | {:.4g} | {:.1f}% | {} | {} | {} |\n", rank, c.label,
                     c.topology.devices, c.topology.cell(),
                     c.balance.empty() ? "measured" : fmt::format("{}", fmt::join(c.balance, " ")),
                     c.searched_cut ? " (searched)" : "", seconds_text(c.step), c.samples_per_second, 100 * c.bubble,
                     bytes_text(c.peak), bytes_text(c.bytes), c.staleness);
}

}  // namespace

std::string ranked_table(const std::vector<Candidate>& ranked, int top,
                         const std::vector<std::pair<std::string, Candidate>>& also) {
  std::string out =
      fmt::format("| # | scheme | devices | {} | balance | step | samples/s | bubble | peak (fullest device) "
                  "| moved per step | stale |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
                  kTopologyColumn);
  for (size_t i = 0; i < ranked.size() && static_cast<int>(i) < top; ++i) out += table_row(std::to_string(i + 1), ranked[i]);
  for (const auto& [rank, c] : also) out += table_row(rank, c);
  return out;
}

std::string explanation(const PlanResult& result) {
  std::map<std::string, std::vector<const Candidate*>> by_kind;
  for (const Candidate& c : result.lost) by_kind[reason_kind(c.lost)].push_back(&c);
  std::string out;
  for (const auto& [kind, list] : by_kind) {
    out += fmt::format("{} ({} candidate{}):\n", kind, list.size(), list.size() == 1 ? "" : "s");
    for (const Candidate* c : list) {
      if (c->stages == 0) {
        out += fmt::format("  {} (no candidate at all): {}\n", c->label, c->lost);  // the scheme itself
      } else {
        out += fmt::format("  {} on {}: {}\n", c->label, c->topology.text(), c->lost);
      }
    }
  }
  return out;
}

std::vector<const Candidate*> pareto_front(const std::vector<Candidate>& ranked) {
  std::vector<const Candidate*> sorted;
  for (const Candidate& c : ranked) sorted.push_back(&c);
  // In the table's order: the front's fastest point is the winner.
  std::stable_sort(sorted.begin(), sorted.end(), [](const Candidate* a, const Candidate* b) { return ranks_before(*a, *b); });
  std::vector<const Candidate*> front;
  for (const Candidate* c : sorted) {
    if (front.empty() || c->peak < front.back()->peak) front.push_back(c);
  }
  return front;
}

std::string pareto_svg(const std::vector<Candidate>& ranked, const std::string& title) {
  tools::LineChart chart;
  chart.title = title;
  chart.x_label = "simulated step (ms)";
  chart.y_label = "peak memory of the fullest device (MiB)";
  tools::Series front;
  front.label = "Pareto front (no candidate is both faster and smaller)";
  for (const Candidate* c : pareto_front(ranked)) {
    front.x.push_back(c->step * 1e3);
    front.y.push_back(c->peak / (1024.0 * 1024.0));
  }
  chart.series.push_back(front);
  return tools::render_svg(chart);
}

std::string ranked_json(const std::vector<Candidate>& ranked, const std::vector<double>& steps,
                        const std::vector<double>& times) {
  std::vector<json::Object> rows;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const Candidate& c = ranked[i];
    std::vector<int64_t> balance(c.balance.begin(), c.balance.end());
    json::Object row;
    row.add("label", c.label).add("scheme", flow_text(*c.section));
    if (c.compression) row.add("compression", c.compression->any() ? flow_text(c.compression->resolved()) : "none");
    rows.push_back(row
                       .add("stages", c.stages)
                       .add("replicas", c.replicas)
                       .add("devices", c.topology.devices)
                       .add("topology", c.topology.json())
                       .add("balance", balance)
                       .add("searched_cut", c.searched_cut)
                       .add("micro_batches", c.micro_batches)
                       .add("replayed_micro_batches", c.replayed_micro_batches)
                       .add("recompute", std::vector<int64_t>(c.recompute.begin(), c.recompute.end()))
                       .add("offload", std::vector<int64_t>(c.offload.begin(), c.offload.end()))
                       .add("offload_fraction", c.offload_fraction)
                       .add("step_seconds", c.step)
                       .add("samples_per_second", c.samples_per_second)
                       .add("bubble", c.bubble)
                       .add("peak_bytes", c.peaks)
                       .add("peak_above_weights_bytes", c.peaks_above_weights)
                       .add("bytes_per_step", c.bytes)
                       .add("staleness", c.staleness));
    if (i < steps.size()) rows.back().add("steps_to_target", steps[i]).add("time_to_target_seconds", times[i]);
  }
  return json::Object().add("ranked", rows).pretty() + "\n";
}

namespace {

constexpr const char* kPlanLine = "# pipelab-plan: ";

}  // namespace

std::string emitted_header(const Candidate& c, const std::string& command, const std::string& costs) {
  const auto fullest = std::max_element(c.peaks.begin(), c.peaks.end());
  json::Object exact;
  exact.add("label", c.label)
      .add("topology", c.topology.json())
      .add("step_seconds", c.step)
      .add("samples_per_second", c.samples_per_second)
      .add("bubble", c.bubble)
      .add("peak_bytes", c.peaks)
      .add("bytes_per_step", c.bytes);
  const std::string flat = exact.str();
  return fmt::format("# Planned by pipelab {} (git {}): {}\n# Costs: {}\n"
                     "# Predicted: {} on {}: step {}, {:.4g} samples/s, bubble {:.1f}%, peak {} on the fullest device, {} "
                     "moved a step\n{}{}\n",
                     pipelab_version(), git_revision(), command, costs, c.label, c.topology.text(), seconds_text(c.step),
                     c.samples_per_second, 100 * c.bubble, bytes_text(fullest == c.peaks.end() ? 0.0 : *fullest),
                     bytes_text(c.bytes), kPlanLine, flat);
}

std::string predicted_plan_of(const std::string& text) {
  const size_t at = text.find(kPlanLine);
  if (at == std::string::npos || (at > 0 && text[at - 1] != '\n')) return "";
  const size_t start = at + std::string(kPlanLine).size();
  return text.substr(start, text.find('\n', start) - start);
}

YAML::Node emitted_experiment(YAML::Node root, const std::string& file, const Candidate& c,
                              const std::string& written_beside) {
  YAML::Node partition = root["partition"] ? root["partition"] : YAML::Node(YAML::NodeType::Map);
  partition["stages"] = c.stages;
  // A scheme that sets its own copies (data parallelism) has them in its section.
  const YAML::Node& section = *c.section;
  partition["replicas"] = section["replicas"] ? 1 : c.replicas;
  YAML::Node balance(YAML::NodeType::Sequence);
  for (const int n : c.balance) balance.push_back(n);
  balance.SetStyle(YAML::EmitterStyle::Flow);
  if (!c.balance.empty()) partition["balance"] = balance;
  if (!c.recompute.empty()) {
    YAML::Node stages = ConfigValue<Recompute>::write(Recompute{Recompute::Kind::Stages, c.recompute});
    stages.SetStyle(YAML::EmitterStyle::Flow);
    partition["recompute"] = stages;
  }
  if (!c.offload.empty()) {
    YAML::Node stages = ConfigValue<Recompute>::write(Recompute{Recompute::Kind::Stages, c.offload});
    stages.SetStyle(YAML::EmitterStyle::Flow);
    YAML::Node offload(YAML::NodeType::Map);
    offload["stages"] = stages;
    offload["fraction"] = c.offload_fraction;
    offload["prefetch"] = 1;
    offload.SetStyle(YAML::EmitterStyle::Flow);
    partition["offload"] = offload;
  }
  root["partition"] = partition;
  YAML::Node scheme = YAML::Clone(section);
  scheme.SetStyle(YAML::EmitterStyle::Flow);
  root["scheme"] = scheme;
  if (c.compression && c.compression->any()) {
    YAML::Node codecs = c.compression->resolved();
    codecs.SetStyle(YAML::EmitterStyle::Flow);
    root["compression"] = codecs;
  } else if (c.compression) {
    root.remove("compression");
  }
  // Input paths resolve against the experiment file's folder: from the new file's folder
  // they must name the same files.
  const std::string folder = fs::path(file).parent_path().string();
  rebase_input_paths(root, folder.empty() ? "." : folder, written_beside);
  // A sweep's cell was planned: the emitted file runs that one experiment.
  root.remove("sweep");
  add_miniature(root, c.flushed ? static_cast<int64_t>(c.micro_batches) * c.replicas : c.replicas);
  return root;
}

namespace {

/// Whether the miniature's data is synthetic words, which add_miniature narrows to 64.
bool synthetic_words(const YAML::Node& root) {
  const YAML::Node dataset = root["dataset"];
  return dataset && dataset.IsMap() && dataset["type"] && dataset["type"].as<std::string>() == "synthetic" &&
         dataset["tokens"];
}

}  // namespace

YAML::Node miniature_model(const YAML::Node& root, bool vocabulary) {
  YAML::Node out(YAML::NodeType::Map);
  const YAML::Node model = root["model"];
  if (!model || !model.IsMap()) return out;
  Miniature m;
  try {
    const auto source = std::make_shared<ConfigSource>("the planned experiment");
    m = Registry<ModelFactory>::get().create(ConfigNode(YAML::Clone(model), source, "model"))->miniature();
  } catch (const UserError&) {
    return out;  // a section the run itself refuses, with its own message
  }
  for (const auto& [key, value] : m.widths) out["model." + key] = value;
  if (vocabulary && synthetic_words(root)) {
    for (const auto& [key, value] : m.vocabulary) out["model." + key] = value;
  }
  return out;
}

void add_miniature(YAML::Node root, int64_t parts) {
  if (root["presets"] && root["presets"]["cpu-mini"]) return;  // the author's own
  int64_t batch = root["run"] && root["run"]["batch_size"] ? root["run"]["batch_size"].as<int64_t>() : 8;
  YAML::Node mini(YAML::NodeType::Map);
  // Two examples a part: the plan's micro-batches and replicas, smaller.
  if (parts > 0 && batch > 2 * parts) {
    batch = 2 * parts;
    mini["run.batch_size"] = batch;
  }
  mini["run.epochs"] = 1;
  mini["run.max_steps"] = 2;
  mini["run.amp"] = "none";
  mini["run.devices"].push_back("cpu");
  mini["run.devices"].SetStyle(YAML::EmitterStyle::Flow);
  for (const auto& kv : miniature_model(root)) mini[kv.first.as<std::string>()] = kv.second;
  const YAML::Node dataset = root["dataset"];
  if (dataset && dataset["type"] && dataset["type"].as<std::string>() == "synthetic") {
    mini["dataset.samples"] = 2 * batch;
    mini["dataset.test_samples"] = batch;
    if (dataset["tokens"]) {
      YAML::Node tokens;
      tokens["vocabulary"] = 64;
      tokens["length"] = 16;
      tokens.SetStyle(YAML::EmitterStyle::Flow);
      mini["dataset.tokens"] = tokens;
    }
  } else {
    mini["dataset.limit"] = 2 * batch;
    mini["dataset.test_limit"] = batch;
  }
  root["presets"]["cpu-mini"] = mini;
}

}  // namespace pipelab::plan
