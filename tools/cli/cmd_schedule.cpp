/// pipelab schedule --scheme NAME --stages D --microbatches M: the per-stage action lists,
/// a clock-cycle grid and the bubble fraction, without running anything.
#include <fmt/format.h>

#include "core/schedule/timeline.h"
#include "core/schedule/validate.h"
#include "core/scheme/scheme.h"
#include "tools/cli/options.h"

namespace pipelab::cli {

int schedule(const Args& args) {
  po::options_description options("options");
  std::string scheme_name;
  int stages = 4, micro = 8;
  double backward_cost = 1;
  options.add_options()("scheme", po::value(&scheme_name)->required(), "registered scheme (pipelab list scheme)")(
      "stages", po::value(&stages)->default_value(4), "pipeline stages D")(
      "microbatches", po::value(&micro)->default_value(8),
      "micro-batches of one run (GPipe's chunks; mini-batches for 1F1B schemes)")(
      "backward-cost", po::value(&backward_cost)->default_value(1.0), "duration of B relative to F = 1 (whole numbers draw a grid)");
  po::variables_map vm;
  if (!parse(args, "pipelab schedule --scheme NAME [--stages D] [--microbatches M] [--backward-cost C]", options, {}, vm)) {
    return 0;
  }
  if (stages < 1 || micro < 1 || backward_cost <= 0) throw UsageError{"--stages, --microbatches and --backward-cost must be positive"};
  const std::unique_ptr<Scheme> scheme = Registry<Scheme>::get().create_default(scheme_name);
  const int d = scheme->stages(stages);
  const Schedule s = scheme->schedule(d, micro);
  validate_schedule(s, {scheme->max_in_flight(d)});
  const Timeline t = simulate_timeline(s, CostModel::uniform(d, 1, backward_cost));
  fmt::print("{} schedule, {} stage{}, {} micro-batches\n\n", scheme_name, d, d == 1 ? "" : "s", micro);
  fmt::print("per-stage actions (<stage>F<mb> forward, B backward, U optimizer step):\n{}\n", s.to_text());
  if (backward_cost == static_cast<int>(backward_cost)) {
    fmt::print("time ->  (one column per unit; '=' continues a backward; '*' = optimizer step after it)\n{}\n",
               render_grid(t));
  }
  fmt::print("makespan {:.0f} units, bubble fraction {:.4f} ({:.1f}% of device time idle)\n", t.makespan,
             t.bubble_fraction, 100 * t.bubble_fraction);
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(schedule, "print a scheme's per-stage action table and bubble fraction");
