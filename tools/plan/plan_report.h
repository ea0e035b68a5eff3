#pragma once
/// What `pipelab plan` shows and writes (tools/plan/planner.h): the ranked table, why each
/// other candidate lost, the time x memory Pareto front as SVG, and the winner as an
/// experiment file ready to run.
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "tools/plan/planner.h"

namespace pipelab::plan {

/// `n` on one line of flow YAML (a scheme section, a codec), as `--set` takes it.
std::string flow_text(const YAML::Node& n);
/// | # | scheme | devices | stages | replicas | m | balance | step (ms) | samples/s | bubble | peak (GiB) | MiB/step | stale |
/// `also`: rows shown after the top ones whatever their rank, each with its rank's text (the
/// baselines: "single: #31", "dp: does not fit").
std::string ranked_table(const std::vector<Candidate>& ranked, int top,
                         const std::vector<std::pair<std::string, Candidate>>& also = {});
/// The ranked candidates as JSON, fastest first: each one's label, scheme section (flow
/// YAML, as `--set scheme=...` takes it), partition, compression (when the planner chose it:
/// `none` or a section, as `--set compression=...` takes it) and simulated figures.
/// With `--target`, `steps` and `times` (per candidate; NaN: not proxied, inf: not reached)
/// add steps_to_target and time_to_target_seconds (null where not finite).
std::string ranked_json(const std::vector<Candidate>& ranked, const std::vector<double>& steps = {},
                        const std::vector<double>& times = {});
/// One line per candidate that lost, grouped by why (memory, bound, staleness, refused, time).
std::string explanation(const PlanResult& result);
/// The candidates no other beats in both step time and peak memory, fastest first.
std::vector<const Candidate*> pareto_front(const std::vector<Candidate>& ranked);
/// The front as SVG (step time against peak memory; tools/report/svg_plot.h).
std::string pareto_svg(const std::vector<Candidate>& ranked, const std::string& title);
/// The planned experiment `root` (read from `file`, with the --set values and the preset
/// that were planned applied: cli::experiment_tree) with `c`'s partition, scheme and (when the
/// planner chose it) compression: what `pipelab run` takes to run the plan. Relative input
/// paths are made to resolve from `written_beside` (the folder the new file goes to).
/// The comment lines an emitted file starts with: where it came from (`command`, the costs,
/// pipelab's version and revision) and what the plan predicted of it, readable and exact (a
/// `# pipelab-plan: {...}` line of JSON that `pipelab simulate` of the file compares its own
/// replay with: the file is the truth, and the plan must be what it says).
std::string emitted_header(const Candidate& c, const std::string& command, const std::string& costs);

/// The plan a file's header predicted (its `# pipelab-plan:` line's JSON), or "" when it has none.
std::string predicted_plan_of(const std::string& text);

YAML::Node emitted_experiment(YAML::Node root, const std::string& file, const Candidate& c,
                              const std::string& written_beside);

}  // namespace pipelab::plan

namespace pipelab::plan {

/// Adds to an experiment tree (unless it has one) a `cpu-mini` preset: the same plan on this
/// CPU in two steps, the model narrowed as its kind says (ModelFactory::miniature: the same
/// blocks, narrower), the mini-batch cut to two examples per part where `parts` (the plan's
/// micro-batches over its replicas) is given, and the data to two mini-batches, so that
/// `pipelab run FILE --preset cpu-mini` tries an emitted file here.
void add_miniature(YAML::Node root, int64_t parts = 0);

/// The `--set` values (key path to value) that narrow the model of experiment `root` as
/// `cpu-mini` does (ModelFactory::miniature), its vocabulary too where `vocabulary` and the
/// miniature's data is synthetic words (narrowed to 64); none for a model that cannot be made
/// from the tree, or has nothing to narrow.
YAML::Node miniature_model(const YAML::Node& root, bool vocabulary = true);

}  // namespace pipelab::plan
