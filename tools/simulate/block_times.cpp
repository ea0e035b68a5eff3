#include "tools/simulate/block_times.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <thread>
#include <tuple>

#include <torch/torch.h>

#include "core/model/block_io.h"
#include "core/stage/weight_pass.h"
#include "core/util/error.h"
#include "tools/simulate/block_memory.h"
#include "tools/simulate/timing.h"

namespace pipelab::sim {
namespace {

/// The median seconds of `repeats` calls of `fn` after one that warms the allocator up.
double median_seconds(int repeats, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int r = 0; r <= repeats; ++r) {
    const double s = seconds_of(fn);
    if (r > 0) t.push_back(s);
  }
  return median(t);
}

/// A batch of `examples` zero examples of `data`'s shape: the first block's input.
LiveSet model_input(const DataSpec& data, int examples) {
  std::vector<int64_t> shape{examples};
  shape.insert(shape.end(), data.input_shape.begin(), data.input_shape.end());
  return LiveSet(torch::zeros(shape, data.integer_input ? torch::kLong : torch::kFloat));
}

/// Per block, the seconds timed of each action at one size.
struct Samples {
  explicit Samples(size_t blocks) : forward(blocks), backward(blocks), input(blocks), weight(blocks) {}
  std::vector<std::vector<double>> forward, backward, input, weight;
};

/// The roots of a block's backward (its outputs that take a gradient) and the gradients
/// they start from.
struct Roots {
  Tensors outputs, grads;
  explicit Roots(const Tensors& out) {
    for (const at::Tensor& t : out) {
      if (!t.requires_grad()) continue;
      outputs.push_back(t);
      grads.push_back(torch::ones_like(t));
    }
  }
};

/// Seconds of a block's split backward as the executor runs it (core/stage/stage.cpp): I,
/// the inputs' gradients with the graph kept and WeightPass hooking where each weight's path
/// leaves theirs; W, the weights' products from there. Inputs without gradients (a first
/// stage's) leave I nothing and W the whole backward of the weights.
std::pair<double, double> time_split(Block& block, const Tensors& in, bool last, const DataSpec& data, int examples) {
  const Roots roots(with_loss(call_block(block, in), last, data, examples));
  if (roots.outputs.empty()) return {0.0, 0.0};
  Tensors wrt, params;
  for (const at::Tensor& x : in) {
    if (x.requires_grad()) wrt.push_back(x);
  }
  for (const at::Tensor& p : block.module.ptr()->parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  if (wrt.empty()) {
    return {0.0, seconds_of([&] {
              if (!params.empty()) torch::autograd::backward(roots.outputs, roots.grads, false, false, params);
            })};
  }
  std::unique_ptr<WeightPass> pass;
  const double input = seconds_of([&] {
    pass = std::make_unique<WeightPass>(roots.outputs, wrt, params);
    torch::autograd::grad(roots.outputs, wrt, roots.grads, /*retain_graph=*/true, /*create_graph=*/false,
                          /*allow_unused=*/true);
  });
  return {input, seconds_of([&] { pass->run(roots.outputs, roots.grads); })};
}

/// Each block's forward, backward, and split backward's I and W seconds for `examples`
/// examples, `repeats` of each (after one untimed when `warm_up`), appended to
/// `t.forward[b]` and the rest.
void time_at(std::vector<Block>& blocks, const DataSpec& data, int examples, int repeats, bool warm_up, Samples& t) {
  LiveSet live = model_input(data, examples);
  for (size_t b = 0; b < blocks.size(); ++b) {
    Block& block = blocks[b];
    Tensors out;
    const int first = warm_up ? -1 : 0;  // a call that warms the allocator and the kernels up
    for (int r = first; r < repeats; ++r) {
      // The first block's input is the data, which takes no gradient in a run.
      Tensors in = b == 0 ? live.take(block.io.in) : detached_inputs(live, block);
      // The last block's forward computes the loss and its backward starts from it, as the
      // last stage's do (a language model's softmax over the vocabulary is no small part).
      const bool last = b + 1 == blocks.size();
      Tensors loss;
      const double tf = seconds_of([&] {
        out = call_block(block, in);
        loss = with_loss(out, last, data, examples);
      });
      const Roots roots(loss);
      const double tb = seconds_of([&] {
        if (!roots.outputs.empty()) torch::autograd::backward(roots.outputs, roots.grads);
      });
      if (b > 0) in = detached_inputs(live, block);
      const auto [ti, tw] = time_split(block, in, last, data, examples);
      if (r >= 0) {
        t.forward[b].push_back(tf);
        t.backward[b].push_back(tb);
        t.input[b].push_back(ti);
        t.weight[b].push_back(tw);
      }
    }
    Tensors kept;
    for (const at::Tensor& x : out) kept.push_back(x.detach());
    live.update(block, kept);
  }
}

}  // namespace

std::unique_ptr<Optimizer> block_optimizer(Block& block, const OptimizerFactory& factory) {
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  for (const auto& kv : block.module.ptr()->named_parameters()) {
    if (!kv.value().requires_grad() || !kv.value().grad().defined()) continue;
    params.push_back(kv.value());
    names.push_back(block.name + "." + kv.key());
  }
  return params.empty() ? nullptr : factory.make_named(std::move(params), names);
}

namespace {

/// Median seconds of a step of `factory`'s optimizer on each block's parameters (their
/// gradients are there from the timed backwards).
std::vector<double> time_updates(std::vector<Block>& blocks, const OptimizerFactory& factory, int repeats) {
  std::vector<double> out;
  for (Block& block : blocks) {
    const std::unique_ptr<Optimizer> optimizer = block_optimizer(block, factory);
    if (!optimizer) {
      out.push_back(0);
      continue;
    }
    out.push_back(median_seconds(repeats, [&] {
      torch::NoGradGuard no_grad;
      optimizer->step();
    }));
  }
  return out;
}

/// Median seconds of copying each block's parameters into buffers of their size, as
/// WeightSwap and a stash copy them (core/weights/weights.h).
std::vector<double> time_weight_copies(const std::vector<Block>& blocks, int repeats) {
  std::vector<double> out;
  for (const Block& block : blocks) {
    std::vector<at::Tensor> params, buffers;
    for (const at::Tensor& p : block.module.ptr()->parameters()) {
      params.push_back(p.detach());
      buffers.push_back(at::empty_like(p));
    }
    out.push_back(params.empty() ? 0.0 : median_seconds(repeats, [&] {
      for (size_t i = 0; i < params.size(); ++i) buffers[i].copy_(params[i]);
    }));
  }
  return out;
}

/// Gbit/s of ring bytes an all-reduce of two members' gradients (those the timed backwards
/// left) runs at in this host's memory, as the threaded executor's replicas do it
/// (core/comm/collective.cpp, core/comm/gradient_finish.cpp): one member's copy, the
/// other's added and the mean taken, then copied into each member's gradient. A two-member
/// ring sends each member's whole gradient, so its ring bytes are the gradients' bytes.
double time_reduce(const std::vector<Block>& blocks, int repeats) {
  std::vector<at::Tensor> grads;
  double bytes = 0;
  for (const Block& block : blocks) {
    for (const at::Tensor& p : block.module.ptr()->parameters()) {
      if (!p.grad().defined()) continue;
      grads.push_back(p.grad());
      bytes += static_cast<double>(p.grad().nbytes());
    }
  }
  if (grads.empty()) return 0;
  std::vector<at::Tensor> other, mine;
  for (const at::Tensor& g : grads) {
    other.push_back(g.clone());
    mine.push_back(g.clone());
  }
  torch::NoGradGuard no_grad;
  const double seconds = median_seconds(repeats, [&] {
    for (size_t k = 0; k < grads.size(); ++k) {
      const at::Tensor sum = grads[k].clone();
      sum.add_(other[k]).div_(2);
      mine[k].copy_(sum);
      other[k].copy_(sum);
    }
  });
  return bytes * 8 / std::max(seconds, 1e-9) / 1e9;
}

/// One pass of `examples` examples over `blocks` as a device runs them: each block's forward
/// on the previous one's output, then its backward.
void sweep(std::vector<Block>& blocks, const DataSpec& data, int examples) {
  LiveSet live = model_input(data, examples);
  for (size_t b = 0; b < blocks.size(); ++b) {
    Block& block = blocks[b];
    const Tensors out = call_block(block, b == 0 ? live.take(block.io.in) : detached_inputs(live, block));
    const Roots roots(with_loss(out, b + 1 == blocks.size(), data, examples));
    if (!roots.outputs.empty()) torch::autograd::backward(roots.outputs, roots.grads);
    Tensors kept;
    for (const at::Tensor& t : out) kept.push_back(t.detach());
    live.update(block, kept);
  }
}

/// Seconds of a sweep on each of `copies` at once, one thread each with `threads` intra-op
/// threads, started together (a spinning barrier: they must overlap, not follow each other).
std::vector<double> concurrent_sweeps(std::vector<std::vector<Block>*> copies, const DataSpec& data, int examples,
                                      int threads) {
  std::vector<double> seconds(copies.size());
  std::vector<std::exception_ptr> errors(copies.size());
  std::atomic<size_t> ready{0};
  std::vector<std::thread> workers;
  for (size_t k = 0; k < copies.size(); ++k) {
    workers.emplace_back([&, k] {
      at::set_num_threads(threads);  // per calling thread, as the threaded executor's devices
      ++ready;
      while (ready.load() < copies.size()) std::this_thread::yield();
      try {
        seconds[k] = seconds_of([&] { sweep(*copies[k], data, examples); });
      } catch (...) {
        errors[k] = std::current_exception();  // rethrown once every thread has joined
      }
    });
  }
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return seconds;
}

/// BlockTimes::busy_slowdown: a sweep of the model alone against the same sweep on k threads
/// at once (each its own copy of the blocks, as each device holds its own stages), at each of
/// `sizes`, for k up to the devices the cores hold at `threads` each (more devices than that
/// take the cores by turns: the last figure stands for them). Alone and together alternate,
/// round after round, for the drift.
std::vector<SizeCurve> time_busy_slowdown(const ModelDef& def, uint64_t seed, std::vector<Block>& blocks,
                                          const DataSpec& data, const std::vector<int>& sizes, int threads, int rounds) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int most = std::min(8, std::max(2, cores / threads));
  std::vector<std::vector<Block>> copies;
  std::vector<SizeCurve> out;
  for (int k = 2; k <= most; ++k) {
    copies.emplace_back();
    for (size_t i = 0; i < def.blocks.size(); ++i) {
      copies.back().push_back(build_block(def, i, seed));
      copies.back().back().module.ptr()->train();
    }
    std::vector<std::vector<Block>*> busy{&blocks};
    for (std::vector<Block>& c : copies) busy.push_back(&c);
    SizeCurve curve;
    for (const int n : sizes) {
      std::vector<double> alone, together;
      for (int r = 0; r <= rounds; ++r) {  // round 0 warms the copies up
        const double a = concurrent_sweeps({&blocks}, data, n, threads)[0];
        const std::vector<double> t = concurrent_sweeps(busy, data, n, threads);
        if (r == 0) continue;
        alone.push_back(a);
        together.insert(together.end(), t.begin(), t.end());
      }
      curve.examples.push_back(n);
      curve.values.push_back(std::max(1.0, median(together) / std::max(median(alone), 1e-9)));
    }
    out.push_back(curve);
  }
  return out;
}

/// Seconds of the whole model's forward (every block on the last one's output, the graph
/// kept, the loss) and of one backward from the loss: the blocks as a stage runs them.
std::pair<double, double> chain_seconds(std::vector<Block>& blocks, const DataSpec& data, int examples) {
  LiveSet live = model_input(data, examples);
  Tensors out;
  const double forward = seconds_of([&] {
    for (size_t b = 0; b < blocks.size(); ++b) {
      out = call_block(blocks[b], live.take(blocks[b].io.in));
      if (b + 1 < blocks.size()) live.update(blocks[b], out);
    }
    out = with_loss(out, true, data, examples);
  });
  const Roots roots(out);
  const double backward = seconds_of([&] {
    if (!roots.outputs.empty()) torch::autograd::backward(roots.outputs, roots.grads);
  });
  return {forward, backward};
}

/// Per size, the model's chained forward and backward over the sum of its blocks' timed
/// ones: the median of `repeats` chains in each of `rounds` rounds (after one that warms up).
std::pair<SizeCurve, SizeCurve> chain_factors(std::vector<Block>& blocks, const DataSpec& data,
                                              const std::vector<int>& sizes, const std::vector<Samples>& timed,
                                              int repeats, int rounds) {
  std::vector<std::vector<double>> forward(sizes.size()), backward(sizes.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t z = 0; z < sizes.size(); ++z) {
      for (int r = round == 0 ? -1 : 0; r < repeats; ++r) {
        const auto [f, b] = chain_seconds(blocks, data, sizes[z]);
        if (r < 0) continue;
        forward[z].push_back(f);
        backward[z].push_back(b);
      }
    }
  }
  SizeCurve f, b;
  for (size_t z = 0; z < sizes.size(); ++z) {
    double alone_f = 0, alone_b = 0;
    for (size_t k = 0; k < blocks.size(); ++k) {
      alone_f += median(timed[z].forward[k]);
      alone_b += median(timed[z].backward[k]);
    }
    f.examples.push_back(sizes[z]);
    b.examples.push_back(sizes[z]);
    f.values.push_back(alone_f > 0 ? median(forward[z]) / alone_f : 1.0);
    b.values.push_back(alone_b > 0 ? median(backward[z]) / alone_b : 1.0);
  }
  return {f, b};
}

}  // namespace

Tensors detached_inputs(const LiveSet& live, const Block& block) {
  Tensors out;
  for (const at::Tensor& t : live.take(block.io.in)) {
    at::Tensor d = t.detach();
    if (d.is_floating_point()) d.requires_grad_(true);
    out.push_back(d);
  }
  return out;
}

std::vector<int> timed_sizes(int small, int large) {
  std::vector<int> out{small};
  for (int i = 1; i <= 3; ++i) {
    const int n = static_cast<int>(std::lround(small * std::pow(static_cast<double>(large) / small, i / 3.0)));
    if (n > out.back()) out.push_back(n);
  }
  return out;
}

std::vector<double> BlockTimes::busy_slowdown_at(double examples) const {
  std::vector<double> out{1.0};
  for (const SizeCurve& c : busy_slowdown) out.push_back(std::max(1.0, c.at(examples)));
  return out;
}

BlockTimes time_blocks(const ModelDef& def, const DataSpec& data, uint64_t seed, const OptimizerFactory& optimizer,
                       int small, int large, int threads, int repeats, int rounds) {
  PIPELAB_ASSERT(0 < small && small < large && repeats > 0 && rounds > 0, "two sizes to time blocks at, small < large");
  const int before = at::get_num_threads();
  at::set_num_threads(threads);
  std::vector<Block> blocks;
  for (size_t i = 0; i < def.blocks.size(); ++i) {
    blocks.push_back(build_block(def, i, seed));
    blocks.back().module.ptr()->train();
  }
  // The sizes in alternating rounds: this machine's speed drifts by tens of percent within
  // seconds, and timing one size after another would tilt every curve with it.
  const std::vector<int> sizes = timed_sizes(small, large);
  const size_t n = blocks.size();
  std::vector<Samples> timed(sizes.size(), Samples(n));
  for (int round = 0; round < rounds; ++round) {
    for (size_t z = 0; z < sizes.size(); ++z) time_at(blocks, data, sizes[z], repeats, round == 0, timed[z]);
  }
  BlockTimes out;
  std::tie(out.chain_forward, out.chain_backward) = chain_factors(blocks, data, sizes, timed, repeats, rounds);
  out.update = time_updates(blocks, optimizer, repeats * rounds);
  out.weight_copy = time_weight_copies(blocks, repeats * rounds);
  out.reduce_gbps = time_reduce(blocks, repeats * rounds);
  out.busy_slowdown = time_busy_slowdown(def, seed, blocks, data, sizes, threads, rounds);
  at::set_num_threads(before);
  out.threads = threads;
  // Each block's times as the chain runs it: the forward's by the chain's forward factor,
  // every backward's (B, I and W) by its backward's.
  const auto curve = [&](std::vector<std::vector<double>> Samples::*kind, size_t block, const SizeCurve& factor) {
    SizeCurve c;
    for (size_t z = 0; z < sizes.size(); ++z) {
      c.examples.push_back(sizes[z]);
      c.values.push_back(median((timed[z].*kind)[block]) * factor.values[z]);
    }
    return c;
  };
  for (size_t i = 0; i < n; ++i) {
    out.forward.push_back(curve(&Samples::forward, i, out.chain_forward));
    out.backward.push_back(curve(&Samples::backward, i, out.chain_backward));
    out.input_backward.push_back(curve(&Samples::input, i, out.chain_backward));
    out.weight_backward.push_back(curve(&Samples::weight, i, out.chain_backward));
  }
  return out;
}

}  // namespace pipelab::sim
