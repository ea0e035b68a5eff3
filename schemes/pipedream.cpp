/// `pipedream`: 1F1B with weight stashing (PipeDream, SOSP'19; docs/schemes.md, "1F1B with weight stashing").
/// Stage r keeps up to D - r weight versions; the update always goes to the newest.
///
/// - variant: paper — the backward of a mini-batch reads exactly the version its forward
///   used; `vertical_sync: true` makes every stage use the version the first stage used for
///   that mini-batch (carried with the activations as the message tag), i.e. delayed SGD
///   on a consistent model (docs/schemes.md, "1F1B with weight stashing"), up to D versions per stage.
/// - variant: reference — the released runtime (and SpecTrain's PD columns, which came from
///   it): a ring of D - r snapshots filled with W_0 once and never reset at the epoch flush,
///   so the first w_r backwards of each later epoch read previous-epoch weights (docs/schemes.md, "Quirks"). The
///   public runtime has no vertical sync (docs/schemes.md, "Quirks").
/// - gap_aware (Gap-Aware, Barkai et al. ICLR 2020, as FTPipe's `ws_ga` pipelines run it, for
///   SGD, Adam and AdamW; docs/schemes.md, "Gap-Aware on pipedream"): before each update of a chosen stage, the
///   gradient is divided elementwise by P = 1 + |W_stash - W| / C (core/weights/gap_aware.h). Which stages:
///   FTPipe's policies `all_except_last` (its shipped configs), `almost_last_partition`,
///   `all_except_last_two`. `gap_aware_raw_normaliser` takes Adam's C without bias
///   correction, as FTPipe's code does (fidelity, docs/schemes.md, "Quirks").
#include "core/schedule/weight_copies.h"
#include "core/weights/gap_aware.h"
#include "core/weights/stashing_policy.h"

namespace pipelab {
namespace {

struct PipedreamOptions {
  FlushOption flush;
  Variant variant = Variant::Paper;
  bool vertical_sync = false;
  GapAwareStages gap_aware = GapAwareStages::Off;
  bool gap_aware_raw_normaliser = false;
  template <class V>
  void fields(V& v) {
    flush.fields(v);
    v.choice("variant", variant, variant_choices(),
             "paper: backward reads its forward's version; reference: the released code's ring, not reset at flushes");
    v("vertical_sync", vertical_sync, "every stage uses the first stage's version of each mini-batch (paper only)");
    v.choice("gap_aware", gap_aware, gap_aware_stage_choices(),
             "Gap-Aware penalty on these stages' stale gradients (FTPipe's policies; SGD, Adam, AdamW)");
    v("gap_aware_raw_normaliser", gap_aware_raw_normaliser,
      "Adam/AdamW Gap-Aware: C = sqrt(S) + eps as FTPipe's code, without bias correction (a fidelity flag)");
  }
  void check(const ConfigNode& node) const {
    if (vertical_sync && variant == Variant::Reference) {
      node.child("vertical_sync").fail("the released PipeDream runtime has no vertical sync",
                                       "use variant: paper with vertical_sync, or vertical_sync: false");
    }
  }
};

class PipedreamPolicy : public StashingPolicy {
 public:
  PipedreamPolicy(Stage& stage, const PipedreamOptions& o)
      : StashingPolicy(stage, o.variant == Variant::Paper ? StashedWeights::Backward::ForwardVersion
                                                          : StashedWeights::Backward::Ring),
        o_(o), gap_aware_(gap_aware_at(o.gap_aware, stage.index(), stage.count())), ga_(o.gap_aware_raw_normaliser) {}

  void before_forward(Stage& stage, int mb, Message& in) override {
    int64_t wanted = -1;  // the live weights
    // Vertical sync: the first stage's version travels with the activations.
    if (o_.vertical_sync) wanted = stage.is_first() ? stage.optimizer().steps() : in.tag;
    record_.forward(mb, stash_.before_forward(mb, wanted));
  }
  void after_forward(Stage& stage, int mb, Message& out) override {
    StashingPolicy::after_forward(stage, mb, out);
    if (o_.vertical_sync) out.tag = stash_.forward_version(mb);
  }
  void after_backward(Stage& stage, int mb) override {
    // Gap-Aware measures the distance from the weights this backward read (still swapped in).
    if (gap_aware_) {
      read_ = copy_weights(stage);
      last_mb_ = mb;
    }
    StashingPolicy::after_backward(stage, mb);
  }

  /// The stash's state, and with Gap-Aware its statistics: [stash, gap_aware].
  c10::IValue state() const override {
    if (!gap_aware_) return StashingPolicy::state();
    return c10::ivalue::Tuple::create({StashingPolicy::state(), ga_.state()});
  }
  void load_state(Stage& stage, const c10::IValue& s) override {
    if (!gap_aware_ || !s.isTuple()) return StashingPolicy::load_state(stage, s);
    StashingPolicy::load_state(stage, s.toTupleRef().elements()[0]);
    ga_.load_state(stage, s.toTupleRef().elements()[1]);
  }

 protected:
  void step(Stage& stage) override {
    if (gap_aware_) {
      // The staleness (docs/schemes.md, "Gap-Aware on pipedream"): the steps taken since this micro-batch's forward,
      // min(j, w_r).
      const int64_t staleness = std::min<int64_t>(last_mb_, warmup(stage.index(), stage.count()));
      ga_.before_step(stage, staleness, &read_);
      record_.add(stage, "gap_aware_penalty", ga_.mean_penalty());
    }
    stage.step();
  }

 private:
  PipedreamOptions o_;
  bool gap_aware_;
  GapAware ga_;
  Weights read_;
  int64_t last_mb_ = 0;
};

class Pipedream : public OneFOneBScheme<PipedreamOptions> {
 public:
  using OneFOneBScheme::OneFOneBScheme;
  /// One stashed version per mini-batch in flight: D - r at stage r (PipeDream docs/schemes.md, "gpipe").
  StageMemory stage_memory(int stage, int stages) const override { return {static_cast<double>(stages - stage), false}; }
  /// Each update's weights stashed, and each backward's stashed version swapped in (the
  /// reference's ring reads the same versions in steady state).
  WeightWorks weight_work(const std::vector<Action>& stage_actions, int, int) const override {
    return stash_copies(stage_actions);
  }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    return std::make_unique<PipedreamPolicy>(stage, options_);
  }
  /// Its stages replicate (PipeDream's 2-1-1 configurations).
  std::shared_ptr<const ReplicaTopology> topology() const override {
    return std::make_shared<const ReplicatedStages>(options_);
  }

 private:
  /// 1F1B-RR (SOSP'19 section 3.2) with the paper's stashing: a replica's backward reads the version
  /// its forward used, whichever micro-batches it takes. The released ring (sized D - r), the
  /// first stage's version as a tag (counted in the first stage's updates, which replicated
  /// stages take every R-th mini-batch) and Gap-Aware's staleness min(j, D - 1 - r) all assume
  /// one replica per stage.
  class ReplicatedStages : public ReplicaTopology {
   public:
    explicit ReplicatedStages(PipedreamOptions options) : options_(std::move(options)) {}
    std::string replicated_stages_refused(const std::string& /*scheme*/) const override {
      if (options_.variant == Variant::Reference) return "variant: reference sizes its ring for one replica per stage";
      if (options_.vertical_sync) return "vertical_sync counts versions in the first stage's updates";
      if (options_.gap_aware != GapAwareStages::Off) return "gap_aware's staleness assumes one replica per stage";
      return "";
    }

   private:
    PipedreamOptions options_;
  };
};

}  // namespace

PIPELAB_REGISTER(Scheme, Pipedream, "pipedream", "1F1B with weight stashing, optional vertical sync (PipeDream)");

}  // namespace pipelab
