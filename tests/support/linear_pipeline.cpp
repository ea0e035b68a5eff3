#include "tests/support/linear_pipeline.h"

#include <fmt/format.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include "core/optim/optimizer.h"

namespace pipelab::testing {

LinearPipeline::LinearPipeline(const std::string& scheme_yaml, const std::string& optimizer_yaml, int count,
                               int width, int layers, c10::Device device) {
  auto source = std::make_shared<ConfigSource>("test");
  scheme = Registry<Scheme>::get().create(ConfigNode(YAML::Load(scheme_yaml), source, "scheme"));
  const auto optimizer =
      Registry<OptimizerFactory>::get().create(ConfigNode(YAML::Load(optimizer_yaml), source, "optimizer"));
  for (int r = 0; r < count; ++r) {
    torch::manual_seed(static_cast<uint64_t>(r));
    StageSpec spec;
    spec.index = r;
    spec.count = count;
    spec.device = device;
    if (layers == 1) {
      spec.first_block = static_cast<size_t>(r);
      spec.blocks = {{fmt::format("linear{}", r), torch::nn::AnyModule(torch::nn::Linear(width, width))}};
    } else {
      spec.first_block = static_cast<size_t>(r * 2 * layers);
      for (int l = 0; l < layers; ++l) {
        spec.blocks.push_back({fmt::format("linear{}_{}", r, l), torch::nn::AnyModule(torch::nn::Linear(width, width))});
        spec.blocks.push_back({fmt::format("relu{}_{}", r, l), torch::nn::AnyModule(torch::nn::ReLU())});
      }
    }
    if (r + 1 == count) spec.loss = std::make_shared<CrossEntropyLoss>();
    stages.push_back(std::make_unique<Stage>(std::move(spec)));
    stages.back()->set_optimizer(optimizer->make(stages.back()->parameters()));
    policies.push_back(scheme->make_policy(*stages.back()));
    routes.push_back(scheme->add_ons()->route(*stages.back()));
    slots.push_back({stages.back().get(), policies.back().get(), routes.back().get()});
  }
}

std::unique_ptr<Executor> make_executor(const std::string& yaml) {
  return Registry<Executor>::get().create(ConfigNode(YAML::Load(yaml), std::make_shared<ConfigSource>("test"), "executor"));
}

}  // namespace pipelab::testing
