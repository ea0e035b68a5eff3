#include "tools/simulate/block_times.h"

#include <algorithm>
#include <functional>

#include <torch/torch.h>

#include "core/model/block_io.h"
#include "core/util/error.h"
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

/// Each block's forward and backward seconds for `examples` examples, `repeats` of each,
/// appended to `forward[b]` and `backward[b]`.
void time_at(std::vector<Block>& blocks, const DataSpec& data, int examples, int repeats,
             std::vector<std::vector<double>>& forward, std::vector<std::vector<double>>& backward) {
  std::vector<int64_t> shape{examples};
  shape.insert(shape.end(), data.input_shape.begin(), data.input_shape.end());
  LiveSet live(torch::zeros(shape, data.integer_input ? torch::kLong : torch::kFloat));
  for (size_t b = 0; b < blocks.size(); ++b) {
    Block& block = blocks[b];
    Tensors out;
    for (int r = 0; r <= repeats; ++r) {  // the first round warms the allocator and the kernels up
      const Tensors in = detached_inputs(live, block);
      const double tf = seconds_of([&] { out = call_block(block, in); });
      Tensors roots, grads;
      for (const at::Tensor& t : out) {
        if (t.requires_grad()) {
          roots.push_back(t);
          grads.push_back(torch::ones_like(t));
        }
      }
      const double tb = seconds_of([&] {
        if (!roots.empty()) torch::autograd::backward(roots, grads);
      });
      if (r > 0) {
        forward[b].push_back(tf);
        backward[b].push_back(tb);
      }
    }
    Tensors kept;
    for (const at::Tensor& t : out) kept.push_back(t.detach());
    live.update(block, kept);
  }
}

/// Median seconds of a step of `factory`'s optimizer on each block's parameters (their
/// gradients are there from the timed backwards).
std::vector<double> time_updates(std::vector<Block>& blocks, const OptimizerFactory& factory, int repeats) {
  std::vector<double> out;
  for (Block& block : blocks) {
    std::vector<at::Tensor> params;
    for (const at::Tensor& p : block.module.ptr()->parameters()) {
      if (p.requires_grad() && p.grad().defined()) params.push_back(p);
    }
    if (params.empty()) {
      out.push_back(0);
      continue;
    }
    const std::unique_ptr<Optimizer> optimizer = factory.make(params);
    out.push_back(median_seconds(repeats, [&] {
      torch::NoGradGuard no_grad;
      optimizer->step();
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

}  // namespace

Affine Affine::through(double n1, double y1, double n2, double y2) {
  const double slope = std::max(0.0, (y2 - y1) / (n2 - n1));
  return Affine{std::max(0.0, y2 - slope * n2), slope};
}

Tensors detached_inputs(const LiveSet& live, const Block& block) {
  Tensors out;
  for (const at::Tensor& t : live.take(block.io.in)) {
    at::Tensor d = t.detach();
    if (d.is_floating_point()) d.requires_grad_(true);
    out.push_back(d);
  }
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
  // The two sizes in alternating rounds: this machine's speed drifts by tens of percent
  // within seconds, and timing one size after the other would tilt every line with it.
  const size_t n = blocks.size();
  std::vector<std::vector<double>> f_small(n), b_small(n), f_large(n), b_large(n);
  for (int round = 0; round < rounds; ++round) {
    time_at(blocks, data, small, repeats, f_small, b_small);
    time_at(blocks, data, large, repeats, f_large, b_large);
  }
  BlockTimes out;
  out.update = time_updates(blocks, optimizer, repeats * rounds);
  out.reduce_gbps = time_reduce(blocks, repeats * rounds);
  at::set_num_threads(before);
  out.threads = threads;
  for (size_t i = 0; i < blocks.size(); ++i) {
    out.forward.push_back(Affine::through(small, median(f_small[i]), large, median(f_large[i])));
    out.backward.push_back(Affine::through(small, median(b_small[i]), large, median(b_large[i])));
  }
  return out;
}

}  // namespace pipelab::sim
