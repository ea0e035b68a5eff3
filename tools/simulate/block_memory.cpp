#include "tools/simulate/block_memory.h"

#include <torch/torch.h>

#include "core/model/meta_device.h"
#include "core/stage/weight_pass.h"
#include "core/util/memory_meter.h"
#include "tools/simulate/block_times.h"

namespace pipelab::sim {
namespace {

at::Tensor zero_input(const DataSpec& data, int examples, at::Device device) {
  std::vector<int64_t> shape{examples};
  shape.insert(shape.end(), data.input_shape.begin(), data.input_shape.end());
  return torch::zeros(shape, torch::TensorOptions(data.integer_input ? torch::kLong : torch::kFloat).device(device));
}

/// `block`'s forward on `in` (with the loss on the last block) as the run's stage makes it:
/// the blocks under one autocast scope, the loss under another (core/stage/stage.cpp).
Tensors forward_of(Block& block, const Tensors& in, bool last, const DataSpec& data, int examples,
                   const AutocastSpec* amp) {
  Tensors out;
  {
    ShapeAutocast scope(amp);
    out = call_block(block, in);
  }
  ShapeAutocast scope(amp);
  return with_loss(out, last, data, examples);
}

/// What one block's actions need, per size measured.
struct Rises {
  std::vector<double> forward, backward;  ///< how far each raises the bytes while it runs
  std::vector<double> kept;               ///< what a split backward's I keeps for its W
  std::vector<double> input, weight;      ///< how far a split backward's I and W raise them
};

/// The roots a backward of `out` starts from, and the gradients it starts with (allocated
/// outside any scope, as a stage receives them).
void roots_of(const Tensors& out, Tensors& roots, Tensors& grads) {
  for (const at::Tensor& t : out) {
    if (t.requires_grad()) {
      roots.push_back(t);
      grads.push_back(torch::ones_like(t));
    }
  }
}

/// A split backward on `block` (run on `in`): the bytes its I keeps until its W (the
/// gradients arriving at each weight's node, which core/stage/weight_pass.h holds for W,
/// less the input gradients I sends: they leave with the message), and how far its I and its
/// W raise the bytes while they run (a W computes only the weights' products).
void measure_split(Block& block, const Tensors& in, bool last, const DataSpec& data, int examples, MemoryMeter* meter,
                   int tag, const AutocastSpec* amp, Rises& r) {
  const Tensors out = forward_of(block, in, last, data, examples, amp);
  Tensors roots, grads, wrt, weights;
  roots_of(out, roots, grads);
  for (const at::Tensor& x : in) {
    if (x.requires_grad()) wrt.push_back(x);
  }
  for (const at::Tensor& p : block.module.ptr()->parameters()) {
    if (p.requires_grad()) weights.push_back(p);
  }
  if (roots.empty() || wrt.empty()) {
    r.kept.push_back(0);
    r.input.push_back(0);
    r.weight.push_back(0);
    return;
  }
  WeightPass pass(roots, wrt, weights);
  {
    MemoryMeter::Scope scope(meter, tag);
    torch::autograd::grad(roots, wrt, grads, /*retain_graph=*/true, /*create_graph=*/false, /*allow_unused=*/true);
    r.kept.push_back(static_cast<double>(scope.retained()));
    r.input.push_back(static_cast<double>(scope.peak_rise()));
  }
  MemoryMeter::Scope scope(meter, tag);
  pass.run(roots, grads);
  r.weight.push_back(static_cast<double>(scope.peak_rise()));
}

/// Per block, how far its forward and its backward raise its bytes above their level at the
/// start, for `examples` examples, and what a split backward's I keeps. Each block runs alone
/// on the previous one's output, cut from the graph as a stage receives it, twice: the second
/// time (the one counted) its parameters' gradients exist and are accumulated into, as in
/// every backward of a step but the first.
void measure_rises(std::vector<Block>& blocks, const DataSpec& data, int examples, at::Device device, MemoryMeter* meter,
                   const AutocastSpec* amp, Rises& r) {
  LiveSet live(zero_input(data, examples, device));
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int tag = static_cast<int>(blocks.size() + i);  // apart from the retained bytes' tags
    const bool last = i + 1 == blocks.size();
    Tensors out;
    int64_t forward_rise = 0, backward_rise = 0;
    for (int round = 0; round < 2; ++round) {
      const Tensors in = detached_inputs(live, blocks[i]);
      {
        MemoryMeter::Scope scope(meter, tag);
        out = forward_of(blocks[i], in, last, data, examples, amp);
        forward_rise = scope.peak_rise();
      }
      Tensors roots, grads;
      roots_of(out, roots, grads);
      MemoryMeter::Scope scope(meter, tag);
      if (!roots.empty()) torch::autograd::backward(roots, grads);
      backward_rise = scope.peak_rise();
    }
    r.forward.push_back(static_cast<double>(forward_rise));
    r.backward.push_back(static_cast<double>(backward_rise));
    measure_split(blocks[i], detached_inputs(live, blocks[i]), last, data, examples, meter, tag, amp, r);
    if (i + 1 == blocks.size()) break;
    Tensors kept;
    for (const at::Tensor& t : out) kept.push_back(t.detach());
    live.update(blocks[i], kept);
  }
}

/// Per block, how far a step of `factory`'s optimizer on its parameters raises the bytes: the
/// second step, once the first has made the state it keeps (their gradients are there from
/// measure_rises).
std::vector<double> measure_update_rises(std::vector<Block>& blocks, const OptimizerFactory& factory,
                                         MemoryMeter* meter) {
  std::vector<double> out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::unique_ptr<Optimizer> optimizer = block_optimizer(blocks[i], factory);
    if (!optimizer) {
      out.push_back(0);
      continue;
    }
    torch::NoGradGuard no_grad;
    optimizer->step();
    MemoryMeter::Scope scope(meter, static_cast<int>(2 * blocks.size() + i));
    optimizer->step();
    out.push_back(static_cast<double>(scope.peak_rise()));
  }
  return out;
}

/// The bytes per example of the floating tensors of `live`.
double floating_bytes_per_example(const LiveSet& live, int examples) {
  int64_t bytes = 0;
  for (const at::Tensor& t : live.values()) {
    if (t.defined() && t.is_floating_point()) bytes += static_cast<int64_t>(t.nbytes());
  }
  return static_cast<double>(bytes) / examples;
}

/// Per block, the bytes its forward allocated that are still alive once the whole forward of
/// `examples` examples has run (the graph hangs on the live set and on the loss); and, given
/// `cut`, the floating bytes per example live after each block but the last.
std::vector<double> retained(std::vector<Block>& blocks, const DataSpec& data, at::Device device, MemoryMeter* meter,
                             int examples, const AutocastSpec* amp, std::vector<double>* cut = nullptr) {
  // The input is allocated before the first scope: the feed's, not a block's.
  LiveSet live(zero_input(data, examples, device));
  std::vector<int64_t> before;
  for (size_t i = 0; i < blocks.size(); ++i) before.push_back(meter->usage(static_cast<int>(i)).current);
  Tensors loss;
  for (size_t i = 0; i < blocks.size(); ++i) {
    MemoryMeter::Scope scope(meter, static_cast<int>(i));
    const bool last = i + 1 == blocks.size();
    const Tensors out = forward_of(blocks[i], live.take(blocks[i].io.in), last, data, examples, amp);
    if (last) {
      loss = out;
    } else {
      live.update(blocks[i], out);
      if (cut) cut->push_back(floating_bytes_per_example(live, examples));
    }
  }
  std::vector<double> out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    out.push_back(static_cast<double>(meter->usage(static_cast<int>(i)).current - before[i]));
  }
  return out;
}

}  // namespace

Tensors with_loss(Tensors out, bool last, const DataSpec& data, int examples) {
  if (!last || out.empty() || !out.front().is_floating_point()) return out;
  std::vector<int64_t> shape{examples};
  shape.insert(shape.end(), data.target_shape.begin(), data.target_shape.end());
  return {CrossEntropyLoss().compute(out.front(), torch::zeros(shape, out.front().options().dtype(torch::kLong)))};
}

BlockMemory measure_block_memory(const ModelDef& def, const DataSpec& data, uint64_t seed,
                                 const OptimizerFactory* optimizer, int examples, bool meta, const AutocastSpec* amp) {
  ProfileBlocks build(def, seed, meta);
  return measure_block_memory(def, data, build, optimizer, examples, amp);
}

BlockMemory measure_block_memory(const ModelDef& def, const DataSpec& data, ProfileBlocks& build,
                                 const OptimizerFactory* optimizer, int examples, const AutocastSpec* amp) {
  std::vector<Block> blocks;
  for (size_t i = 0; i < def.blocks.size(); ++i) {
    blocks.push_back(build(i));
    blocks.back().module.ptr()->train();
  }
  auto meter = std::make_shared<MemoryMeter>();
  BlockMemory out;
  out.measured = true;
  MemoryMeter::Install install(meter);
  const std::vector<double> kept = retained(blocks, data, build.device(), meter.get(), examples, amp, &out.cut_per_example);
  if (amp) {
    // The casts of the weights are the same at any size: two sizes tell them apart.
    out.precision = c10::toString(amp->dtype);
    const std::vector<double> more = retained(blocks, data, build.device(), meter.get(), 4 * examples, amp);
    for (size_t i = 0; i < blocks.size(); ++i) {
      const Affine line = Affine::through(examples, kept[i], 4 * examples, more[i]);
      out.retained_per_example.push_back(std::max(0.0, line.per_example));
      out.retained_fixed.push_back(std::max(0.0, line.fixed));
    }
  } else {
    for (const double bytes : kept) out.retained_per_example.push_back(bytes / examples);
  }
  // Two sizes fix the line: the weight-sized temporaries of a backward do not grow with the
  // micro-batch, the activation-sized ones do.
  const int large = 4 * examples;
  Rises small, big;
  measure_rises(blocks, data, examples, build.device(), meter.get(), amp, small);
  measure_rises(blocks, data, large, build.device(), meter.get(), amp, big);
  for (size_t i = 0; i < blocks.size(); ++i) {
    out.forward_rise.push_back(Affine::through(examples, small.forward[i], large, big.forward[i]));
    out.backward_rise.push_back(Affine::through(examples, small.backward[i], large, big.backward[i]));
    out.input_backward_kept.push_back(Affine::through(examples, small.kept[i], large, big.kept[i]));
    out.input_backward_rise.push_back(Affine::through(examples, small.input[i], large, big.input[i]));
    out.weight_backward_rise.push_back(Affine::through(examples, small.weight[i], large, big.weight[i]));
  }
  if (optimizer) out.update_rise = measure_update_rises(blocks, *optimizer, meter.get());
  return out;
}

}  // namespace pipelab::sim
