#include "schemes/shared/interlocking_heads.h"

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <cctype>

#include <fmt/format.h>

#include "core/nn/batch_norm.h"
#include "core/util/error.h"

namespace pipelab::interlocking {
namespace {

/// One parsed layer: conv (channels, with or without batch norm), pool, or linear.
struct Layer {
  enum class Kind { Conv, Pool, Linear } kind;
  int64_t width = 0;  ///< channels / features; 0 = the classes
  bool batch_norm = false;
};

[[noreturn]] void bad(const std::string& spec, const std::string& token, const std::string& why) {
  throw HeadSpecError(fmt::format("'{}' in '{}' {}", token, spec, why),
                      "build heads from conv<C>, bn, gbpl, fc<H> and a final fc, joined by '_' (e.g. "
                      "conv128_bn_conv64_bn_gbpl_fc for images, fc256_fc for vectors)");
}

std::vector<Layer> parse(const std::string& spec) {
  std::vector<Layer> layers;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t end = std::min(spec.find('_', start), spec.size());
    const std::string token = spec.substr(start, end - start);
    start = end + 1;
    const auto number = [&](size_t prefix) -> int64_t {
      const std::string digits = token.substr(prefix);
      if (digits.empty()) return 0;
      if (!std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
          std::stoll(digits) <= 0) {
        bad(spec, token, "has a bad width");
      }
      return std::stoll(digits);
    };
    if (token == "bn") {
      if (layers.empty() || layers.back().kind != Layer::Kind::Conv || layers.back().batch_norm) {
        bad(spec, token, "must follow a conv<C>");
      }
      layers.back().batch_norm = true;
    } else if (token == "gbpl") {
      layers.push_back({Layer::Kind::Pool});
    } else if (token.rfind("conv", 0) == 0) {
      const int64_t c = number(4);
      if (c == 0) bad(spec, token, "needs a channel count (conv128)");
      layers.push_back({Layer::Kind::Conv, c});
    } else if (token.rfind("fc", 0) == 0) {
      layers.push_back({Layer::Kind::Linear, number(2)});
    } else {
      bad(spec, token, "is not a known token");
    }
    if (end == spec.size()) break;
  }
  if (layers.empty() || layers.back().kind != Layer::Kind::Linear || layers.back().width != 0) {
    bad(spec, spec, "must end with fc (the linear layer to the classes)");
  }
  return layers;
}

/// The head: its layers in order, with ReLUs after convolutions and hidden linears.
class HeadImpl : public torch::nn::Module {
 public:
  HeadImpl(const std::string& spec, std::vector<int64_t> shape, int64_t classes) {
    int index = 0;
    for (const Layer& l : parse(spec)) {
      ++index;
      Step step{l.kind, {}};
      if (l.kind == Layer::Kind::Conv) {
        if (shape.size() != 3) bad(spec, fmt::format("conv{}", l.width), "needs image outputs [C, H, W]");
        step.module = torch::nn::AnyModule(register_module(
            fmt::format("conv{}", index), torch::nn::Conv2d(torch::nn::Conv2dOptions(shape[0], l.width, 3).padding(1))));
        if (l.batch_norm) step.norm = register_module(fmt::format("bn{}", index), nn::BatchNorm(l.width));
        shape[0] = l.width;
      } else if (l.kind == Layer::Kind::Pool) {
        if (shape.size() != 3) bad(spec, "gbpl", "needs image outputs [C, H, W]");
        shape = {shape[0]};
      } else {
        int64_t in = 1;
        for (int64_t d : shape) in *= d;
        const int64_t out = l.width ? l.width : classes;
        step.module = torch::nn::AnyModule(register_module(fmt::format("fc{}", index), torch::nn::Linear(in, out)));
        step.relu = l.width != 0;
        shape = {out};
      }
      steps_.push_back(std::move(step));
    }
  }

  at::Tensor forward(at::Tensor x) {
    for (Step& s : steps_) {
      switch (s.kind) {
        case Layer::Kind::Conv:
          x = s.module.forward(x);
          if (s.norm) x = s.norm(x);
          x = at::relu(x);
          break;
        case Layer::Kind::Pool: x = x.mean({2, 3}); break;
        case Layer::Kind::Linear:
          x = s.module.forward(x.dim() > 2 ? x.flatten(1) : x);
          if (s.relu) x = at::relu(x);
          break;
      }
    }
    return x;
  }

 private:
  struct Step {
    Layer::Kind kind;
    torch::nn::AnyModule module;
    nn::BatchNorm norm{nullptr};
    bool relu = false;
  };
  std::vector<Step> steps_;
};
TORCH_MODULE(Head);

}  // namespace

void check_head_grammar(const std::string& spec) { parse(spec); }

torch::nn::AnyModule build_head(const std::string& spec, const std::vector<int64_t>& input_shape, int64_t classes) {
  return torch::nn::AnyModule(Head(spec, input_shape, classes));
}

std::string default_head(const std::vector<int64_t>& input_shape) {
  return input_shape.size() == 3 ? "conv128_bn_conv64_bn_gbpl_fc" : "fc";
}

}  // namespace pipelab::interlocking
