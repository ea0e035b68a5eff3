/// `dp`: the data-parallel baseline (docs/schemes.md §3.10, F18). N replicas of the
/// whole model; each mini-batch is split into N shards (chunk semantics), replica r runs
/// forward and backward on shard r with its own batch-norm statistics, the gradients are
/// summed across replicas by an all-reduce, and every replica takes the same step.
/// Each shard's mean loss is scaled by its share n_r/N of the mini-batch, so the summed
/// gradient is exactly the mini-batch mean's; with equal shards this is DDP's average of
/// per-replica means. The all-reduce is core/exec/collective.h: in-process here, over a
/// c10d process group with the distributed executor.
#include "core/exec/collective.h"
#include "core/scheme/scheme.h"

namespace pipelab {
namespace {

struct DpOptions {
  int replicas = 2;
  template <class V>
  void fields(V& v) {
    v("replicas", replicas, "data-parallel replicas N (each holds the whole model)", positive);
  }
};

class DpPolicy : public StagePolicy {
 public:
  explicit DpPolicy(std::shared_ptr<AllReduce> all_reduce) : all_reduce_(std::move(all_reduce)) {}
  void after_backward(Stage& stage, int) override { all_reduce_->produced(stage.index()); }
  void all_reduce(Stage& stage) override { all_reduce_->sum_gradients(stage.index(), stage.parameters()); }

 private:
  std::shared_ptr<AllReduce> all_reduce_;
};

class Dp : public Configured<Scheme, DpOptions> {
 public:
  using Configured::Configured;
  Topology topology() const override { return Topology::Replicas; }
  int stages(int) const override { return options_.replicas; }
  int micro_batches() const override { return options_.replicas; }
  /// Replica r: F(r) B(r) on its shard (if the mini-batch has that many shards), reading
  /// the feed itself (no RECV_F), then the all-reduce every replica joins, then U:
  /// `d1: 1F1 1B1 1ALLREDUCE 1U`.
  Schedule schedule(int stages, int units) const override {
    Schedule s(stages);
    for (int r = 0; r < stages; ++r) {
      if (r < units) {
        s.add(r, Action::F(r, r));
        s.add(r, Action::B(r, r));
      }
      s.add(r, Action::all_reduce(r));
      s.add(r, Action::U(r));
    }
    return s;
  }
  ValidateOptions schedule_rules(int stages) const override {
    ValidateOptions o = Scheme::schedule_rules(stages);
    o.kinds.push_back(ActionKind::AllReduce);
    return o;
  }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    // One group per run: the first replica's policy starts it, the others join.
    if (stage.index() == 0) group_ = make_all_reduce(stage.count());
    group_->add_rank(stage.index(), stage.parameters());
    return std::make_unique<DpPolicy>(group_);
  }

 private:
  mutable std::shared_ptr<AllReduce> group_;
};

}  // namespace

PIPELAB_REGISTER(Scheme, Dp, "dp", "data parallelism: N replicas, gradients summed by an all-reduce");

}  // namespace pipelab
