/// `naive`: vanilla sequential model parallelism (docs/schemes.md, "Naive model parallelism", docs/schemes.md,
/// "naive"). Each mini-batch goes forward through stages 0..D-1 and backward through D-1..0, each stage
/// stepping right after its own backward. One stage works at a time (utilisation 1/D); numerically identical to
/// `single` (same kernels in the same order). Not the SpecTrain "MP" columns (those are `async`, docs/schemes.md,
/// "Quirks").
#include "core/schedule/generators.h"
#include "core/scheme/scheme.h"

namespace pipelab {
namespace {

struct NaiveOptions {
  template <class V>
  void fields(V&) {}
};

class Naive : public Configured<Scheme, NaiveOptions> {
 public:
  using Configured::Configured;
  Schedule schedule(int stages, int units) const override { return schedules::naive(stages, units); }
  std::vector<int> max_in_flight(int stages) const override { return std::vector<int>(static_cast<size_t>(stages), 1); }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Naive, "naive", "sequential model parallelism: one stage busy at a time");

}  // namespace pipelab
