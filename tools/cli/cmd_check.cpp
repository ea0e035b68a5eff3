/// pipelab check scheme NAME [--set scheme.key=value ...]: the conformance every scheme of
/// the registry passes in the test suite (tests/exec/executor_equivalence_test.cpp,
/// tests/tools/launch_test.cpp, the resume tests), run on one scheme — built in, or loaded
/// from a plugin — on a small MLP: its schedules are valid at 1, 2 and 4 stages, threaded
/// equals sequential bitwise, two processes equal one bitwise, a resumed run equals an
/// uninterrupted one bitwise, and one stage against `single` in float64 (reported: a scheme
/// whose rule differs at one stage may differ there).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/io/atomic_file.h"
#include "core/io/pt_file.h"
#include "core/scheme/replicas.h"
#include "core/plan/run_plan.h"
#include "core/train/plan_request.h"
#include "core/train/runner.h"
#include "core/util/error.h"
#include "core/util/names.h"
#include "tools/cli/options.h"

namespace fs = std::filesystem;

namespace pipelab::cli {
namespace {

/// The experiment every check trains: dropout, so that the executors must agree on masks too.
std::string experiment_yaml(const std::string& scheme, int stages, const std::string& dtype) {
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

class Checker {
 public:
  Checker(std::string scheme, std::vector<std::string> sets, std::string pipelab)
      : scheme_(std::move(scheme)), sets_(std::move(sets)), pipelab_(std::move(pipelab)) {
    char pattern[] = "/tmp/pipelab-check-XXXXXX";
    if (!::mkdtemp(pattern)) throw WriteError("cannot make a temporary folder under /tmp");
    dir_ = pattern;
  }
  ~Checker() {
    std::error_code e;
    fs::remove_all(dir_, e);
  }

  /// Trains in this process; the final weights.
  TensorDict train(const std::string& name, int stages, std::vector<std::string> extra, const std::string& dtype,
                   const std::string& scheme) {
    const std::string file = write(name, stages, dtype, scheme);
    if (scheme == scheme_) extra.insert(extra.end(), sets_.begin(), sets_.end());  // not for `single`
    extra.push_back("run.output=" + dir_ + "/" + name);
    Experiment e = Experiment::load(file, extra);
    RunnerOptions o;
    o.overwrite = true;
    o.quiet = true;
    o.summary = false;
    Runner(e, o).run();
    return weights(name);
  }

  /// `pipelab ARGS` as a child (its output in the folder's log); its exit code.
  int command(const std::string& args, const std::string& log) const {
    return std::system(fmt::format("OMP_NUM_THREADS=1 '{}' {} > '{}/{}.log' 2>&1", pipelab_, args, dir_, log).c_str());
  }

  std::string write(const std::string& name, int stages, const std::string& dtype, const std::string& scheme) const {
    const std::string file = dir_ + "/" + name + ".yaml";
    write_file_atomic(file, experiment_yaml(scheme, stages, dtype));
    return file;
  }
  TensorDict weights(const std::string& name) const {
    return load_tensor_dict(dir_ + "/" + name + "/checkpoints/final.pt");
  }
  std::string sets_args() const {
    std::string out;
    for (const std::string& s : sets_) out += fmt::format(" --set '{}'", s);
    return out;
  }
  const std::string& scheme() const { return scheme_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string scheme_, dir_;
  std::vector<std::string> sets_;
  std::string pipelab_;
};

/// The largest |a - b| over the tensors of two state dicts (infinity when their names or
/// shapes differ).
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

/// Prints one check's line; false when it failed ("ok" and "note" pass).
class Report {
 public:
  void line(const std::string& check, const std::string& result) {
    fmt::print("  {:<44} {}\n", check, result);
    if (result.rfind("ok", 0) != 0 && result.rfind("note", 0) != 0) ok_ = false;
  }
  bool ok() const { return ok_; }

 private:
  bool ok_ = true;
};

/// The runner validates every schedule of a run when it is built: at 1, 2 and 4 stages.
std::string check_schedules(Checker& c, const std::vector<std::string>& sets) {
  for (const int stages : {1, 2, 4}) {
    try {
      Experiment e = Experiment::load(c.write(fmt::format("stages{}", stages), stages, "float32", c.scheme()), sets);
      RunnerOptions quiet;
      quiet.quiet = true;
      Runner(e, quiet);
    } catch (const UserError& err) {
      return fmt::format("FAILED at {} stages: {}", stages, err.what());
    }
  }
  return "ok";
}

/// Two stages in one process per device of the scheme's placement, against `sequential`.
void check_processes(Checker& c, const std::vector<std::string>& sets, const TensorDict& sequential, Report& report) {
  const std::string file = c.write("launched", 2, "float32", c.scheme());
  const Experiment e = Experiment::load(file, sets);
  const int processes = RunPlan::compile(plan_request(e)).devices();
  const int code = c.command(fmt::format("launch --nproc {} '{}'{} --set run.output='{}/launched' --overwrite --quiet",
                                         processes, file, c.sets_args(), c.dir()),
                             "launch");
  report.line(fmt::format("{} processes == one (2 stages)", processes),
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
             "processes == one (bitwise), a resumed run == an uninterrupted one (bitwise), and one stage against\n"
             "`single` in float64. Exit 0 when every check passes.",
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
  const std::string schedules = check_schedules(c, sets);
  report.line("schedules valid at 1, 2 and 4 stages", schedules);
  if (schedules != "ok") return 1;
  const TensorDict sequential = c.train("sequential", 2, {"run.executor=sequential"}, "float32", c.scheme());
  report.line(
      "threaded == sequential (2 stages)",
      verdict(max_difference(sequential, c.train("threaded", 2, {"run.executor={type: threaded, intra_op_threads: 1}"},
                                                 "float32", c.scheme()))));
  check_processes(c, sets, sequential, report);
  check_resume(c, sequential, report);
  const double one = max_difference(c.train("one", 1, {"run.executor=sequential"}, "float64", c.scheme()),
                                    c.train("single", 1, {"run.executor=sequential"}, "float64", "{type: single}"));
  report.line("1 stage vs single (float64)",
              one < 1e-10 ? fmt::format("ok (max |difference| {:.3g})", one)
                          : fmt::format("note: differs by {:.3g} (fine for a rule that differs at one stage)", one));
  fmt::print("{}\n", report.ok() ? "every check passed" : "some checks FAILED");
  return report.ok() ? 0 : 1;
}

PIPELAB_COMMAND(check, "conformance checks of one scheme: pipelab check scheme NAME");

}  // namespace pipelab::cli
