#include "tests/schemes/toy_pipeline.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

#include "core/schedule/validate.h"
#include "core/scheme/scheme.h"

namespace pipelab::testing {
namespace {

enum class ScalarForm { Product, Sum, HalfSquare, ForwardSquare };

/// y = w * x, x + w or x + w^2 / 2 with one scalar weight.
struct ScalarImpl : torch::nn::Module {
  ScalarImpl(double value, ScalarForm form) : form(form) {
    w = register_parameter("w", at::full({1}, value, at::kDouble));
  }
  at::Tensor forward(const at::Tensor& x) {
    switch (form) {
      case ScalarForm::Sum: return x + w;
      case ScalarForm::HalfSquare: return x + w * w / 2;
      // The gradient is the weight the forward read (a copy), whatever the backward reads.
      case ScalarForm::ForwardSquare: return x + w.detach().clone() * w;
      default: return x * w;
    }
  }
  at::Tensor w;
  ScalarForm form;
};
TORCH_MODULE(Scalar);

class Linear : public Loss {
 public:
  at::Tensor compute(const at::Tensor& out, const at::Tensor&) const override { return out.mean(); }
  at::Tensor correct(const at::Tensor&, const at::Tensor&) const override { return at::zeros({}, at::kLong); }
};

class HalfSquaredError : public Loss {
 public:
  at::Tensor compute(const at::Tensor& out, const at::Tensor& t) const override { return ((out - t).pow(2) / 2).mean(); }
  at::Tensor correct(const at::Tensor&, const at::Tensor&) const override { return at::zeros({}, at::kLong); }
};

/// The four (x, t) pairs of docs/schemes.md, "Toy pipeline", one per micro-batch; losses collected in order.
class ToyFeed : public Feed {
 public:
  explicit ToyFeed(std::vector<double>& losses) : losses_(losses) {}
  at::Tensor input(int mb) override { return at::full({1, 1}, kX[mb % 4], at::kDouble); }
  at::Tensor target(int mb) override { return at::full({1, 1}, kT[mb % 4], at::kDouble); }
  void on_result(int, const MicroBatchResult& r) override { losses_.push_back(r.loss.item<double>()); }
  static constexpr double kX[4] = {1, 2, -1, 0.5};
  static constexpr double kT[4] = {0.5, -1, 0, 1};

 private:
  std::vector<double>& losses_;
};

}  // namespace

ToyResult run_toy(const std::string& scheme_yaml, const ToyConfig& config) {
  auto source = std::make_shared<ConfigSource>("toy.yaml");
  const auto scheme = Registry<Scheme>::get().create(ConfigNode(YAML::Load(scheme_yaml), source, "scheme"));
  const std::string optimizer_yaml =
      config.optimizer.empty() ? fmt::format("{{type: sgd, lr: {}, momentum: {}, weight_decay: {}}}", config.lr,
                                             config.momentum, config.weight_decay)
                               : config.optimizer;
  const auto optimizer = Registry<OptimizerFactory>::get().create(ConfigNode(YAML::Load(optimizer_yaml), source, "o"));
  const int stages = static_cast<int>(config.init.size() / 2);
  const ScalarForm form = config.quadratic_at_forward ? ScalarForm::ForwardSquare
                          : config.quadratic         ? ScalarForm::HalfSquare
                          : config.constant_gradient ? ScalarForm::Sum
                                                     : ScalarForm::Product;
  std::vector<std::unique_ptr<Stage>> owned;
  std::vector<std::unique_ptr<StagePolicy>> policies;
  std::vector<std::unique_ptr<GradientRoute>> routes;
  std::vector<StageSlot> slots;
  for (int r = 0; r < stages; ++r) {
    StageSpec spec;
    spec.index = r;
    spec.count = stages;
    spec.first_block = static_cast<size_t>(2 * r);
    const bool head = config.greedy_heads && r + 1 < stages;
    for (int k = 0; k < (head ? 1 : 2); ++k) {
      spec.blocks.push_back({fmt::format("{}{}", k ? 'b' : 'a', r),
                             torch::nn::AnyModule(Scalar(config.init[static_cast<size_t>(2 * r + k)], form))});
    }
    if (r + 1 == stages) {
      spec.loss = form != ScalarForm::Product ? std::shared_ptr<Loss>(std::make_shared<Linear>())
                                           : std::make_shared<HalfSquaredError>();
    }
    owned.push_back(std::make_unique<Stage>(std::move(spec)));
    if (head) {
      owned.back()->set_head(fmt::format("b{}", r),
                             torch::nn::AnyModule(Scalar(config.init[static_cast<size_t>(2 * r + 1)], form)),
                             std::make_shared<HalfSquaredError>());
    }
    owned.back()->set_optimizer(optimizer->make(owned.back()->parameters()));
    policies.push_back(scheme->make_policy(*owned.back()));
    routes.push_back(scheme->add_ons()->route(*owned.back()));
    slots.push_back({owned.back().get(), policies.back().get(), routes.back().get()});
  }
  auto executor = Registry<Executor>::get().create_default("sequential");
  ToyResult result;
  ToyFeed feed(result.losses);
  result.metrics.resize(static_cast<size_t>(stages));
  for (int e = 0; e < config.epochs; ++e) {
    if (scheme->span() == Span::MiniBatch) {
      // Synchronous schemes: one schedule run per mini-batch, as the runner does.
      for (int j = 0; j < config.examples; ++j) {
        struct One : Feed {
          ToyFeed& inner;
          int j;
          One(ToyFeed& f, int j) : inner(f), j(j) {}
          at::Tensor input(int) override { return inner.input(j); }
          at::Tensor target(int) override { return inner.target(j); }
          void on_result(int, const MicroBatchResult& r) override { inner.on_result(j, r); }
        } one(feed, j);
        executor->run(scheme->schedule(stages, 1), slots, one, RunMode::Train);
      }
    } else {
      const Schedule s = scheme->schedule(stages, config.examples);
      validate_schedule(s, {scheme->max_in_flight(stages)});
      executor->run(s, slots, feed, RunMode::Train);
    }
    for (size_t r = 0; r < static_cast<size_t>(stages); ++r) {
      policies[r]->collect(result.metrics[r]);
      if (routes[r]) routes[r]->collect(result.metrics[r]);
    }
  }
  for (const auto& s : owned) {
    for (const at::Tensor& p : s->parameters()) result.weights.push_back(p.item<double>());
  }
  return result;
}

}  // namespace pipelab::testing
