#pragma once
// What the multi-process tests share (launch_test.cpp, torchrun_test.cpp): the command, a
// small experiment, and "the same run".
#include <string>
#include <utility>

namespace pipelab::testing {

/// `pipelab ARGS` with one OpenMP thread; (exit code, output).
std::pair<int, std::string> pipelab(const std::string& args);

/// A 2-stage gpipe MLP with dropout, 2 epochs of 8 steps.
extern const char* const kExperiment;

/// What the every-scheme suites run (launch, offload): a 5-block MLP with dropout and batch
/// norm on 2 stages, `single` (the cases set the scheme), 1 epoch of 4 steps.
extern const char* const kEverySchemeMlp;

/// Expects runs `a` and `b` (folders) to hold the same final weights, per-step losses and
/// traffic figures.
void expect_same_run(const std::string& a, const std::string& b);

}  // namespace pipelab::testing
