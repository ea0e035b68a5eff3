/// `single`: no pipeline. The whole model is one stage; F, B, U per mini-batch. The
/// reference every other scheme is compared against (docs/schemes.md, "single").
#include "core/schedule/generators.h"
#include "core/scheme/scheme.h"

namespace pipelab {
namespace {

struct SingleOptions {
  template <class V>
  void fields(V&) {}
};

class Single : public Configured<Scheme, SingleOptions> {
 public:
  using Configured::Configured;
  /// Always one stage, whatever the partition asks for.
  int stages(int) const override { return 1; }
  Schedule schedule(int stages, int units) const override { return schedules::naive(stages, units); }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Single, "single", "no pipeline: the whole model on one stage (the reference)");

}  // namespace pipelab
