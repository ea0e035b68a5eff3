/// `chimera`: Chimera's bidirectional pipelines (Li, Hoefler, SC'21; docs/schemes.md, "chimera").
/// Two replicas of the pipeline run in opposite directions on the same devices (worker p holds
/// stage p of the down pipeline and stage D-1-p of the up one), each on half of every
/// mini-batch, and the two copies of each stage all-reduce their gradients before the update:
/// synchronous, so it equals `single` on the whole mini-batch (docs/schemes.md, "chimera"), at two weight copies per
/// device. The replicas are the framework's (core/schedule/replicate.h); Chimera gives their
/// joint schedule and placement (schemes/schedules/chimera.cpp).
///
/// `chunks` is m, the micro-batches of a mini-batch over both pipelines (m/2 each, a multiple of
/// D/2). `mode` for m > D: `concat` (direct concatenation of basic units) or `doubling`
/// (forward doubling; it holds twice the activations, which the reference code meets by
/// recomputing: combine with checkpointing there). The paper's backward halving has no source
/// (UNVERIFIED, docs/schemes.md, "Quirks") and is refused. `gradient_scale: reference` reproduces the reference code's
/// gradient, (m/2) x the mean (docs/schemes.md, "Quirks"); its per-tensor clipping (docs/schemes.md, "Quirks") is
/// `optimizer.clip_scope: per_tensor`. Both replicas start from the same weights (the default, docs/schemes.md,
/// "Quirks"); `replica_init: as_built` draws the up pipeline's weights apart, as the newer reference runtime's
/// (main_bert.py) building order does without a broadcast.
#include <fmt/format.h>

#include "core/model/model.h"
#include "schemes/schedules/modern.h"
#include "schemes/shared/sync_pipeline.h"

namespace pipelab {
namespace {

struct ChimeraOptions {
  enum class Mode { Concat, Doubling, BackwardHalving };
  enum class Scale { Mean, Reference };
  enum class Init { Same, AsBuilt };
  int chunks = 8;
  Init replica_init = Init::Same;
  Mode mode = Mode::Concat;
  Scale gradient_scale = Scale::Mean;
  template <class V>
  void fields(V& v) {
    v("chunks", chunks, "micro-batches per mini-batch over both pipelines (m; m/2 each, a multiple of D/2)",
      positive);
    v.choice("mode", mode,
             Choices<Mode>{{"concat", Mode::Concat}, {"doubling", Mode::Doubling},
                           {"backward_halving", Mode::BackwardHalving}},
             "m > D: concat (direct concatenation of basic units) or doubling (forward doubling); backward_halving is "
             "unspecified (UNVERIFIED) and refused");
    v.choice("gradient_scale", gradient_scale, Choices<Scale>{{"mean", Scale::Mean}, {"reference", Scale::Reference}},
             "mean: the mini-batch's mean gradient; reference: (m/2) x it, as Chimera's reference code applies "
             "(fidelity flag)");
    v.choice("replica_init", replica_init, Choices<Init>{{"same", Init::Same}, {"as_built", Init::AsBuilt}},
             "same: both pipelines' copies of a stage start equal; as_built: the up pipeline's are drawn from "
             "other seeds, as the reference runtime builds them without a broadcast (fidelity flag)");
  }
  void check(const ConfigNode& node) const {
    if (mode == Mode::BackwardHalving) {
      node.child("mode").fail("Chimera's backward halving is named in the paper but specified nowhere pipelab's "
                              "sources read (UNVERIFIED; docs/schemes.md, \"chimera\")",
                              "use mode: concat or mode: doubling");
    }
    if (chunks % 2 != 0) {
      node.child("chunks").fail(fmt::format("{} micro-batches do not split between two pipelines", chunks),
                                "use an even number");
    }
  }
};

/// The gradient-scale fidelity flag (docs/schemes.md, "Quirks"): the update applies (m/2) x the
/// all-reduced mean gradient.
class ScaledUpdate : public StagePolicy {
 public:
  explicit ScaledUpdate(double factor) : factor_(factor) {}
  void update(Stage& stage) override {
    for (const at::Tensor& p : stage.parameters()) {
      if (p.grad().defined()) p.mutable_grad().mul_(factor_);
    }
    stage.step();
  }

 private:
  double factor_;
};

class Chimera : public SyncPipeline<ChimeraOptions> {
 public:
  using SyncPipeline::SyncPipeline;
  int micro_batches() const override { return options_.chunks / 2; }
  int replicas(int /*requested*/) const override { return 2; }
  Schedule schedule(int stages, int units) const override {
    fail("partition.replicas", fmt::format("chimera runs its two pipelines together ({} stages, {} micro-batches)",
                                           stages, units),
         "leave partition.replicas out: chimera sets its own 2");
  }
  /// Its two pipelines share the devices, in opposite directions, as one schedule.
  std::shared_ptr<const ReplicaTopology> topology() const override {
    return std::make_shared<const Bidirectional>(*this);
  }
  std::unique_ptr<StagePolicy> make_policy(Stage& /*stage*/) const override {
    if (options_.gradient_scale == ChimeraOptions::Scale::Mean) return std::make_unique<StagePolicy>();
    return std::make_unique<ScaledUpdate>(options_.chunks / 2.0);
  }

 private:
  /// The down and the up pipeline as one schedule on the same devices (Chimera, SC'21 section 3.1).
  class Bidirectional : public ReplicaTopology {
   public:
    explicit Bidirectional(const Chimera& scheme) : scheme_(scheme) {}
    Schedule joint_schedule(int stages, const std::vector<int>& units) const override {
      if (units.size() != 2 || units[0] != units[1]) {
        scheme_.fail("chunks",
                     fmt::format("a mini-batch split into {} and {} micro-batches per pipeline", units.front(),
                                 units.back()),
                     "make run.batch_size a multiple of scheme.chunks");
      }
      return schedules::chimera(stages, units[0], scheme_.options_.mode == ChimeraOptions::Mode::Doubling);
    }
    std::vector<int> joint_placement(int stages, int /*replicas*/) const override {
      return schedules::chimera_placement(stages);
    }
    uint64_t replica_seed(int replica, uint64_t seed) const override {
      // Chimera's reference runtime seeds once, then every worker builds its up-pipeline
      // stage before its down one, so the copies come from different draws (docs/schemes.md
      // docs/schemes.md, "Quirks"); any other fixed draw stands for them here.
      if (replica == 0 || scheme_.options_.replica_init == ChimeraOptions::Init::Same) return seed;
      return block_seed(seed ^ 0x436869u, static_cast<size_t>(replica));  // "Chi"
    }

   private:
    const Chimera& scheme_;
  };
};

}  // namespace

PIPELAB_REGISTER(Scheme, Chimera, "chimera",
                 "Chimera: two pipelines in opposite directions on the same devices, replicas of each stage "
                 "all-reduced; synchronous");

}  // namespace pipelab
