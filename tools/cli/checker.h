#pragma once
/// What `pipelab check scheme` (tools/cli/cmd_check.cpp) trains with: a small MLP in a
/// temporary folder, trained in this process or by a child `pipelab`, and the report of
/// checks that pass or fail.
#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "core/io/pt_file.h"
#include "core/scheme/scheme.h"

namespace pipelab::cli {

/// The experiment every check trains (dropout on unless `dropout` is 0, so that the executors
/// must agree on masks too).
std::string check_experiment_yaml(const std::string& scheme, int stages, const std::string& dtype);

/// A trained run of the checks: its final weights, and each parameter's pipeline stage.
struct CheckRun {
  TensorDict weights;
  std::map<std::string, int> stage_of;  ///< "<block>.<param>" -> pipeline stage
  std::vector<int> update_gaps;         ///< per stage, the schedule's (core/schedule/update_gaps.h)
  std::string dir;                      ///< the run folder
  int stages = 0;                       ///< the pipeline stages the scheme ran (`dp` fixes its own)
};

class Checker {
 public:
  Checker(std::string scheme, std::vector<std::string> sets, std::string pipelab);
  ~Checker();
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  /// Trains `scheme` (the checked one gets the user's --set values) in this process with the
  /// `extra` overrides.
  CheckRun train(const std::string& name, int stages, std::vector<std::string> extra, const std::string& dtype,
                 const std::string& scheme);
  /// `pipelab ARGS` as a child (its output in the folder's log); its exit code.
  int command(const std::string& args, const std::string& log) const;
  /// The experiment file of a run named `name`.
  std::string write(const std::string& name, int stages, const std::string& dtype, const std::string& scheme) const;
  TensorDict weights(const std::string& name) const;
  /// " --set 'k=v'" for each of the user's values.
  std::string sets_args() const;
  const std::string& scheme() const { return scheme_; }
  const std::vector<std::string>& sets() const { return sets_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string scheme_, dir_;
  std::vector<std::string> sets_;
  std::string pipelab_;
};

/// The largest |a - b| over the tensors of two state dicts (infinity when their names or
/// shapes differ).
double max_difference(const TensorDict& a, const TensorDict& b);

/// "ok (bitwise)" or "FAILED (max |difference| ...)".
std::string verdict(double difference);

/// Prints one check's line; failed when a line is neither "ok" nor "note".
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

/// What the scheme declares its numbers are (Scheme::numerics), at each of `stages` (the counts
/// it takes of 1, 2 and 4): a synchronous scheme trains to `single`'s float64 weights (with
/// several micro-batches where it has a count of them), and a failure names the first step and
/// the stages that differ; an asynchronous one's gradients are never staler than its schedule
/// and its forward lag say; on one stage it is compared with `single` and a difference noted.
void check_numerics(Checker& c, const Scheme& declared, const std::vector<int>& stages, Report& report);

}  // namespace pipelab::cli
