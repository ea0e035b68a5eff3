#pragma once
/// One measurement about a stage, reported by its weight policy or its gradient route.
#include <cstdint>
#include <string>

namespace pipelab {

/// One measurement a policy makes about its stage (a version gap, a prediction error, an
/// auxiliary head's loss), at the stage's update `step`. The runner writes them to
/// metrics/stages.csv and prints a per-stage summary at the end of the run.
struct StageMetric {
  int64_t step = 0;
  std::string name;
  double value = 0;
};

}  // namespace pipelab
