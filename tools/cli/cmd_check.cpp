/// pipelab check scheme NAME [--set scheme.key=value ...]: the conformance every scheme of
/// the registry passes in the test suite (tests/exec/executor_equivalence_test.cpp,
/// tests/tools/launch_test.cpp, the resume tests), run on one scheme — built in, or loaded
/// from a plugin — on a small MLP: its schedules are valid at 1, 2 and 4 stages, threaded
/// equals sequential bitwise, two processes equal one bitwise, a resumed run equals an
/// uninterrupted one bitwise, and what it declares of its numbers holds (tools/cli/checker.h):
/// a synchronous scheme equals `single` in float64 at 1, 2 and 4 stages, an asynchronous one
/// is no staler than its schedule says.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/experiment/plan_request.h"
#include "core/plan/run_plan.h"
#include "core/run/runner.h"
#include "core/util/error.h"
#include "core/util/names.h"
#include "tools/cli/checker.h"
#include "tools/cli/options.h"

namespace fs = std::filesystem;

namespace pipelab::cli {
namespace {

/// The runner validates every schedule of a run when it is built: at 1, 2 and 4 stages. A
/// scheme may take only some stage counts (a V puts two on a device): a refusal at
/// partition.stages leaves that count out of the checks, said in the line; 2 stages it must take.
std::string check_schedules(Checker& c, const std::vector<std::string>& sets, std::vector<int>& taken) {
  std::string refused;
  for (const int stages : {1, 2, 4}) {
    try {
      Experiment e = Experiment::load(c.write(fmt::format("stages{}", stages), stages, "float32", c.scheme()), sets);
      RunnerOptions quiet;
      quiet.quiet = true;
      Runner(e, quiet);
      taken.push_back(stages);
    } catch (const UserError& err) {
      const std::string what = err.what();
      if (stages == 2 || what.find("partition.stages") == std::string::npos) {
        return fmt::format("FAILED at {} stages: {}", stages, what);
      }
      refused += fmt::format("; {} stage{} refused at partition.stages", stages, stages == 1 ? "" : "s");
    }
  }
  return refused.empty() ? "ok" : "ok (" + refused.substr(2) + ")";
}

/// Two stages in one process per device of the scheme's placement, against `sequential`.
void check_processes(Checker& c, const std::vector<std::string>& sets, const TensorDict& sequential, Report& report) {
  const std::string file = c.write("launched", 2, "float32", c.scheme());
  const Experiment e = Experiment::load(file, sets);
  const int processes = RunPlan::compile(plan_request(e)).devices();
  const int code = c.command(fmt::format("launch --nproc {} '{}'{} --set run.output='{}/launched' --overwrite --quiet",
                                         processes, file, c.sets_args(), c.dir()),
                             "launch");
  report.line(fmt::format("{} process{} == one (2 stages)", processes, processes == 1 ? "" : "es"),
              code == 0 ? verdict(max_difference(sequential, c.weights("launched")))
                        : fmt::format("FAILED (pipelab launch exited {}; its log: {}/launch.log)", code, c.dir()));
}

/// Stopped after epoch 1 and resumed in a second process, against `sequential`.
void check_resume(Checker& c, const TensorDict& sequential, Report& report) {
  const std::string file = c.write("resumed", 2, "float32", c.scheme());
  const std::string common =
      fmt::format("{} --set run.executor=sequential --set run.output='{}/resumed' --quiet", c.sets_args(), c.dir());
  const int first = c.command(fmt::format("run '{}'{} --stop-after 1", file, common), "resume1");
  const int second = first == 0 ? c.command(fmt::format("run '{}'{} --resume", file, common), "resume2") : first;
  report.line("resumed after epoch 1 == uninterrupted",
              second == 0 ? verdict(max_difference(sequential, c.weights("resumed")))
                          : fmt::format("FAILED (pipelab run exited {}; logs in {})", second, c.dir()));
}

}  // namespace

int check(const Args& args) {
  po::options_description options("options");
  std::string what, name;
  std::vector<std::string> sets;
  options.add_options()("what", po::value(&what), "scheme")("name", po::value(&name), "a registered scheme")(
      "set", po::value(&sets)->composing(), "a scheme option: --set scheme.chunks=4 (repeatable)");
  po::positional_options_description positional;
  positional.add("what", 1).add("name", 1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab check scheme NAME [--set scheme.key=value ...]\n\n"
             "Runs the conformance checks the test suite runs on every registered scheme, on one scheme (built in\n"
             "or loaded with --plugin): schedules valid at 1, 2 and 4 stages, threaded == sequential and two\n"
             "processes == one (bitwise), a resumed run == an uninterrupted one (bitwise), and what the scheme\n"
             "declares of its numbers (Scheme::numerics): synchronous, it equals `single` in float64 at 1, 2 and 4\n"
             "stages with several micro-batches, and a failure names the first step and the stages that differ;\n"
             "asynchronous, no gradient is staler than its schedule and forward lag allow. Exit 0 when every\n"
             "check passes, 1 when one fails.",
             options, positional, vm)) {
    return 0;
  }
  if (what != "scheme" || name.empty()) throw UsageError{"give what to check: pipelab check scheme NAME"};
  if (!Registry<Scheme>::get().find(name)) {
    throw UsageError{unknown_name_message("scheme", name, Registry<Scheme>::get().names())};
  }
  for (const std::string& s : sets) {
    if (s.rfind("scheme.", 0) != 0) throw UsageError{fmt::format("--set {}: only scheme.<key>=value is checked", s)};
  }
  Checker c(fmt::format("{{type: {}}}", name), sets, fs::read_symlink("/proc/self/exe").string());
  Report report;
  fmt::print("pipelab check scheme {}{}\n", name, c.sets_args());
  std::vector<int> taken;
  const std::string schedules = check_schedules(c, sets, taken);
  report.line("schedules valid at 1, 2 and 4 stages", schedules);
  if (schedules.rfind("ok", 0) != 0) return 1;
  const TensorDict sequential = c.train("sequential", 2, {"run.executor=sequential"}, "float32", c.scheme()).weights;
  report.line("threaded == sequential (2 stages)",
              verdict(max_difference(sequential, c.train("threaded", 2, {"run.executor={type: threaded, intra_op_threads: 1}"},
                                                         "float32", c.scheme())
                                                     .weights)));
  check_processes(c, sets, sequential, report);
  check_resume(c, sequential, report);
  const Experiment declared = Experiment::load(c.write("declared", 2, "float32", c.scheme()), sets);
  check_numerics(c, *declared.scheme, taken, report);
  fmt::print("{}\n", report.ok() ? "every check passed" : "some checks FAILED");
  return report.ok() ? 0 : 1;
}

PIPELAB_COMMAND(check, "conformance checks of one scheme: pipelab check scheme NAME");

}  // namespace pipelab::cli
