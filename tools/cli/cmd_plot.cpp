/// pipelab plot RUNS_DIR --metric COLUMN --x epoch|time [--group-by KEYS] [--out FILE.svg]:
/// learning curves from the runs under a folder, as an SVG file.
#include <fmt/format.h>

#include <iostream>

#include "core/io/atomic_file.h"
#include "tools/cli/options.h"
#include "tools/report/curves.h"
#include "tools/report/output_path.h"

namespace pipelab::cli {

int plot(const Args& args) {
  po::options_description options("options");
  std::string dir, group_by, out, title;
  std::vector<std::string> where;
  tools::CurveOptions co;
  options.add_options()("runs", po::value(&dir)->required(), "folder of runs (searched recursively)")(
      "metric", po::value(&co.metric)->default_value("test_acc"),
      "a column of metrics/epochs.csv: test_acc, test_loss, train_loss, train_acc, lr, samples_per_second, ...; "
      "with --x step one of metrics/steps.csv: loss (the default there; train_loss names it too), lr")(
      "x", po::value(&co.x)->default_value("epoch"),
      "epoch, time (cumulative wall-clock seconds), simulated_time (cumulative training seconds on the "
      "simulated cluster the run was timed on: the time-to-accuracy axis), or step (every training step, from metrics/steps.csv)")(
      "group-by", po::value(&group_by)->default_value(""),
      "one line per group of runs (their mean): keys, comma-separated")(
      "band", "shade each group's min-max range (without --group-by: all runs as one group)")(
      "baseline", po::value(&co.baseline), "a run (its folder name) whose final value is drawn as a reference line")(
      "where", po::value(&where)->composing(), "only runs whose config has key=value (repeatable)")(
      "title", po::value(&title), "chart title")("out", po::value(&out),
                                                 "SVG file (default: next to RUNS_DIR, <RUNS_DIR>.<metric>.svg)");
  po::positional_options_description positional;
  positional.add("runs", 1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab plot RUNS_DIR [--metric COLUMN] [--x epoch|time|simulated_time|step] [--group-by KEYS] [--band]\n"
             "             [--baseline RUN]\n"
             "             [--where k=v] [--title TEXT] [--out FILE.svg]\n\n"
             "Draws one line per run (or per group: the mean) from metrics/epochs.csv into an SVG file. Keys are\n"
             "config key paths or aliases: " +
                 tools::key_aliases_help() + ".",
             options, positional, vm)) {
    return 0;
  }
  // Every step's training loss: what a one-epoch run has to show.
  if (co.x == "step" && vm["metric"].defaulted()) co.metric = "loss";
  co.group_by = tools::parse_keys(group_by, "--group-by");
  check_output_file("--out", out);
  co.band = vm.count("band") > 0;
  std::vector<std::string> skipped;
  const std::vector<tools::RunInfo> runs = tools::filter_runs(tools::load_runs(dir, &skipped), where);
  for (const std::string& s : skipped) std::cerr << "warning: skipped " << s << "\n";
  if (runs.empty()) throw UsageError{"no run matches the --where conditions"};
  tools::LineChart chart = tools::build_curves(runs, co);
  for (const std::string& note : chart.notes) std::cerr << "warning: " << note << "\n";
  if (!title.empty()) chart.title = title;
  const std::string path =
      out.empty() ? tools::sibling_path(
                        dir, co.metric + (co.x == "time" || co.x == "simulated_time" ? "." + co.x : "") + ".svg")
                  : out;
  write_file_atomic(path, tools::render_svg(chart));
  fmt::print("written: {} ({} line{} from {} runs)\n", path, chart.series.size(), chart.series.size() == 1 ? "" : "s",
             runs.size());
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(plot, "learning curves (SVG) from a folder of runs: pipelab plot DIR --metric test_acc --x epoch");
