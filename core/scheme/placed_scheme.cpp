#include "core/scheme/placed_scheme.h"

#include <stdexcept>

namespace pipelab {
namespace {

/// Forwards everything to the scheme it wraps, except placement() and schedule().
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
  std::string replicated_stages_refused() const override {
    return "partition.placement re-places one pipeline's stages, and PipeDream's replicated stages place their own";
  }

  void prepare_stage(Stage& stage, const std::vector<int64_t>& shape, const DataSpec& data) const override {
    inner_->prepare_stage(stage, shape, data);
  }
  bool routes_own_gradients() const override { return inner_->routes_own_gradients(); }
  bool prepares_stages() const override { return inner_->prepares_stages(); }
  int stages(int requested) const override { return inner_->stages(requested); }
  int replicas(int requested) const override { return inner_->replicas(requested); }
  uint64_t replica_seed(int replica, uint64_t seed) const override { return inner_->replica_seed(replica, seed); }
  Span span() const override { return inner_->span(); }
  int micro_batches() const override { return inner_->micro_batches(); }
  std::vector<int> max_in_flight(int stages) const override { return inner_->max_in_flight(stages); }
  ValidateOptions schedule_rules(int stages) const override { return inner_->schedule_rules(stages); }
  StageMemory stage_memory(int stage, int stages) const override { return inner_->stage_memory(stage, stages); }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override { return inner_->make_policy(stage); }
  std::unique_ptr<GradientRoute> make_route(Stage& stage) const override { return inner_->make_route(stage); }

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
