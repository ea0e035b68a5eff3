/// `dp`: the data-parallel baseline (docs/schemes.md, "data parallelism"): `single` with N replicas
/// (partition.replicas; core/schedule/replicate.h). Each mini-batch is split into N shards
/// (chunk semantics), replica r runs forward and backward on shard r with its own
/// batch-norm statistics, the gradients are summed across replicas by an all-reduce, and
/// every replica takes the same step. Each shard's mean loss is scaled by its share n_r/N
/// of the mini-batch, so the summed gradient is exactly the mini-batch mean's; with equal
/// shards this is DDP's average of per-replica means. Kept as a scheme of its own so that
/// `{type: dp, replicas: N}` reads as the baseline it is.
#include "core/schedule/generators.h"
#include "core/scheme/scheme.h"

namespace pipelab {
namespace {

struct DpOptions {
  int replicas = 2;
  template <class V>
  void fields(V& v) {
    v("replicas", replicas, "data-parallel replicas N (each holds the whole model; = single with partition.replicas N)",
      positive);
  }
};

class Dp : public Configured<Scheme, DpOptions> {
 public:
  using Configured::Configured;
  int stages(int) const override { return 1; }
  int replicas(int) const override { return options_.replicas; }
  /// One replica's schedule: F0 B0 U on its shard (the ALLREDUCE comes with the replicas).
  Schedule schedule(int stages, int units) const override { return schedules::naive(stages, units); }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Dp, "dp", "data parallelism: single with N replicas, gradients summed by an all-reduce");

}  // namespace pipelab
