/// pipelab table RUNS_DIR --rows KEYS [--cols KEYS] [--metric PATH]: a results table
/// (Markdown and CSV) from the runs under a folder, e.g. a sweep's output.
#include <fmt/format.h>

#include <cstring>
#include <iostream>

#include "core/io/atomic_file.h"
#include "core/io/input_file.h"
#include "tools/cli/options.h"
#include "tools/report/output_path.h"
#include "tools/report/speedup.h"
#include "tools/report/table.h"

namespace pipelab::cli {

int table(const Args& args) {
  po::options_description options("options");
  std::string dir, rows, cols, metric, reference, out, speedup_vs;
  std::vector<std::string> where;
  int decimals = -1;
  options.add_options()("runs", po::value(&dir)->required(), "folder of runs (searched recursively)")(
      "rows", po::value(&rows)->default_value(""), "row keys, comma-separated (e.g. model)")(
      "cols", po::value(&cols)->default_value(""), "column keys, comma-separated (e.g. scheme,stages)")(
      "metric", po::value(&metric)->default_value("test_acc.final"),
      "a summary.json path: test_acc.final, test_acc.best, samples_per_second, ...")(
      "reference", po::value(&reference), "CSV of published numbers with the table's row and column labels")(
      "speedup-vs", po::value(&speedup_vs),
      "key=value[,key=value]: the baseline cell; each cell shows its speed-up over it (a time: baseline / cell, "
      "a rate: cell / baseline), e.g. --speedup-vs scheme=dp,stages=2")(
      "where", po::value(&where)->composing(), "only runs whose config has key=value (repeatable)")(
      "decimals", po::value(&decimals)->default_value(-1),
      "decimals (default: 4 significant digits of the largest value)")(
      "out", po::value(&out), "output path without extension (default: next to RUNS_DIR, <RUNS_DIR>.<metric>)");
  po::positional_options_description positional;
  positional.add("runs", 1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab table RUNS_DIR --rows KEYS [--cols KEYS] [--metric PATH] [--reference FILE] [--where k=v]\n"
             "                          [--speedup-vs k=v,...] [--decimals N] [--out PATH]\n\n"
             "Writes a Markdown and a CSV table of one summary.json metric, mean ± std (sample) over the runs\n"
             "that share a cell (seeds); diverged runs show as `diverged`, missing cells as `–`, a target never\n"
             "reached (--metric time_to_target.test_acc.simulated_seconds) as `not reached`. Keys are config\n"
             "key paths or aliases: " +
                 tools::key_aliases_help() + ".",
             options, positional, vm)) {
    return 0;
  }
  tools::TableOptions to;
  to.rows = tools::parse_keys(rows, "--rows");
  to.cols = tools::parse_keys(cols, "--cols");
  to.metric = metric;
  if (decimals < -1 || decimals > 17) throw UsageError{fmt::format("--decimals {}: give 0 to 17", decimals)};
  to.decimals = decimals;
  std::vector<std::string> skipped;
  const std::vector<tools::RunInfo> runs = tools::filter_runs(tools::load_runs(dir, &skipped), where);
  for (const std::string& s : skipped) std::cerr << "warning: skipped " << s << "\n";
  if (runs.empty()) throw UsageError{"no run matches the --where conditions"};
  if (vm.count("speedup-vs")) {
    to.speedup_vs = flag_list("--speedup-vs", speedup_vs);
    if (to.speedup_vs.empty()) throw UsageError{"--speedup-vs: give the baseline as key=value, e.g. scheme=dp"};
  }
  tools::ResultTable t = tools::build_table(runs, to);
  if (!to.speedup_vs.empty()) tools::apply_speedup(t, runs);
  if (!reference.empty()) tools::add_reference(t, read_file(reference), reference);
  check_output_file("--out", out);
  std::string base = out.empty() ? tools::sibling_path(dir, metric + (to.speedup_vs.empty() ? "" : ".speedup")) : out;
  for (const char* ext : {".md", ".csv"}) {
    if (base.size() > std::strlen(ext) && base.compare(base.size() - std::strlen(ext), std::string::npos, ext) == 0) {
      base.resize(base.size() - std::strlen(ext));
    }
  }
  const std::string markdown = tools::table_markdown(t);
  write_file_atomic(base + ".md", markdown);
  write_file_atomic(base + ".csv", tools::table_csv(t));
  fmt::print("{}\nwritten: {}.md, {}.csv ({} runs)\n", markdown, base, base, t.runs);
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(table, "a results table (Markdown, CSV) from a folder of runs: pipelab table DIR --rows K --cols K");
