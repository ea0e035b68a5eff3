#pragma once
/// Stages built by hand for executor tests: D stages of one Linear(width, width) block
/// each (or `layers` Linear+ReLU pairs; the last stage ends with cross-entropy) on `device` under a scheme, with policies and slots ready for an
/// executor. Stage r's weights are drawn after torch::manual_seed(r), so every copy (one per
/// simulated process) starts from the same weights.
#include <memory>
#include <string>
#include <vector>

#include "core/exec/executor.h"

namespace pipelab::testing {

struct LinearPipeline {
  LinearPipeline(const std::string& scheme_yaml, const std::string& optimizer_yaml, int stages, int width,
                 int layers = 1, c10::Device device = c10::kCPU);
  std::unique_ptr<Scheme> scheme;
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<std::unique_ptr<StagePolicy>> policies;
  std::vector<std::unique_ptr<GradientRoute>> routes;
  std::vector<StageSlot> slots;
};

/// An executor from its YAML section, e.g. "{type: threaded, intra_op_threads: 1}".
std::unique_ptr<Executor> make_executor(const std::string& yaml);

}  // namespace pipelab::testing
