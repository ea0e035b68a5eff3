#include "core/scheme/placed_scheme.h"

#include <stdexcept>

namespace pipelab {
namespace {

class PlacedTopology : public ReplicaTopology {
 public:
  explicit PlacedTopology(std::shared_ptr<const ReplicaTopology> inner) : inner_(std::move(inner)) {}
  uint64_t replica_seed(int replica, uint64_t seed) const override { return inner_->replica_seed(replica, seed); }
  std::string replicated_stages_refused(const std::string& /*scheme*/) const override {
    return "partition.placement re-places one pipeline's stages, and PipeDream's replicated stages place their own";
  }

 private:
  std::shared_ptr<const ReplicaTopology> inner_;
};

/// Forwards everything to the scheme it wraps, except placement(), schedule() and the
/// replica topology.
class PlacedScheme : public Scheme {
 public:
  PlacedScheme(std::unique_ptr<Scheme> inner, Placement placement, ConfigNode where)
      : inner_(std::move(inner)), placement_(std::move(placement)), where_(std::move(where)) {
    set_type(inner_->type());
  }
  YAML::Node resolved_options() const override { return inner_->resolved_options(); }

  std::vector<int> placement(int stages) const override {
    try {
      return placement_.resolve(stages);
    } catch (const std::invalid_argument& e) {
      where_.fail(e.what(), "give one device per pipeline stage (partition.stages), numbered from 0 without gaps");
    }
  }
  Schedule schedule(int stages, int units) const override {
    return place_stages(inner_->schedule(stages, units), placement(stages));
  }
  /// The placement re-places the scheme's own schedule: copies keep to devices of their own
  /// (a joint schedule would place itself), their seeds are the scheme's.
  std::shared_ptr<const ReplicaTopology> topology() const override {
    return std::make_shared<const PlacedTopology>(inner_->topology());
  }
  std::shared_ptr<const StageAddOns> add_ons() const override { return inner_->add_ons(); }
  int stages(int requested) const override { return inner_->stages(requested); }
  int replicas(int requested) const override { return inner_->replicas(requested); }
  Span span() const override { return inner_->span(); }
  int micro_batches() const override { return inner_->micro_batches(); }
  SequenceSplit sequence_split() const override { return inner_->sequence_split(); }
  std::vector<int> max_in_flight(int stages) const override { return inner_->max_in_flight(stages); }
  ValidateOptions schedule_rules(int stages) const override { return inner_->schedule_rules(stages); }
  StageMemory stage_memory(int stage, int stages) const override { return inner_->stage_memory(stage, stages); }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override { return inner_->make_policy(stage); }
  // Where the stages run changes no number: what the scheme computes is the inner one's.
  Numerics numerics() const override { return inner_->numerics(); }
  int forward_lag() const override { return inner_->forward_lag(); }
  std::string optimizer_refused(const Optimizer& optimizer, int stage, int stages) const override {
    return inner_->optimizer_refused(optimizer, stage, stages);
  }

 private:
  std::unique_ptr<Scheme> inner_;
  Placement placement_;
  ConfigNode where_;
};

}  // namespace

std::unique_ptr<Scheme> placed_scheme(std::unique_ptr<Scheme> scheme, const Placement& placement,
                                      const ConfigNode& where) {
  if (placement.kind == Placement::Kind::Scheme) return scheme;
  return std::make_unique<PlacedScheme>(std::move(scheme), placement, where);
}

}  // namespace pipelab
