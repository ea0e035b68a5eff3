#include "core/model/block_costs.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>

#include "core/device/device.h"
#include "core/model/flop_counter.h"

namespace pipelab {
namespace {

/// Sets training mode on every block; returns the previous modes.
std::vector<bool> set_training(std::vector<Block>& blocks, bool on) {
  std::vector<bool> was;
  for (Block& b : blocks) {
    was.push_back(b.module.ptr()->is_training());
    b.module.ptr()->train(on);
  }
  return was;
}

void restore(std::vector<Block>& blocks, const std::vector<bool>& was) {
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i].module.ptr()->train(was[i]);
}

/// Runs the blocks one after another over `x` in evaluation mode without gradients (no
/// statistic moves); `cost` runs one block on the live set and says what the block cost.
std::vector<double> chained_eval(std::vector<Block>& blocks, const at::Tensor& x,
                                 const std::function<double(Block&, LiveSet&)>& cost) {
  const std::vector<bool> was = set_training(blocks, false);
  at::NoGradGuard no_grad;
  LiveSet live(x);
  std::vector<double> out;
  for (Block& b : blocks) out.push_back(cost(b, live));
  restore(blocks, was);
  return out;
}

}  // namespace

std::vector<double> with_floor(std::vector<double> costs) {
  const double mean = std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(std::max<size_t>(costs.size(), 1));
  for (double& c : costs) c = std::max(c, 0.01 * mean + 1);
  return costs;
}

std::vector<double> block_params(const std::vector<Block>& blocks) {
  std::vector<double> out;
  for (const Block& b : blocks) out.push_back(std::max<double>(1.0, static_cast<double>(count_parameters(*b.module.ptr()))));
  return out;
}

std::vector<double> block_flops(std::vector<Block>& blocks, const at::Tensor& x) {
  return with_floor(chained_eval(blocks, x, [](Block& b, LiveSet& live) {
    FlopCounter counter;
    live.run(b);
    return static_cast<double>(counter.flops());
  }));
}

std::vector<double> block_seconds(std::vector<Block>& blocks, const at::Tensor& x_in, const c10::Device& device,
                                  int repeats) {
  const std::vector<bool> was = set_training(blocks, true);
  std::vector<double> out;
  LiveSet live(x_in.to(device));
  for (Block& b : blocks) {
    // Training-mode passes move batch-norm statistics: put the buffers back afterwards, so
    // that profiling leaves the run's numbers alone.
    std::vector<at::Tensor> buffers;
    for (const at::Tensor& t : b.module.ptr()->buffers()) buffers.push_back(t.detach().clone());
    b.module.ptr()->to(device);
    const auto once = [&] {
      Tensors in = live.take(b.io.in);
      for (at::Tensor& t : in) t = t.detach().requires_grad_(t.is_floating_point());
      device::synchronize(device);
      const auto start = std::chrono::steady_clock::now();
      Tensors y = call_block(b, in);
      Tensors roots;
      for (const at::Tensor& t : y) {
        if (t.requires_grad()) roots.push_back(t.sum());
      }
      if (!roots.empty()) torch::autograd::backward(roots);
      device::synchronize(device);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      for (at::Tensor& p : b.module.ptr()->parameters()) p.mutable_grad() = at::Tensor();
      for (at::Tensor& t : y) t = t.detach();
      return std::make_pair(s, y);
    };
    Tensors next = once().second;  // warm-up (allocator, kernel selection)
    std::vector<double> times;
    for (int k = 0; k < repeats; ++k) times.push_back(once().first);
    std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
    out.push_back(std::max(times[times.size() / 2], 1e-7));
    b.module.ptr()->to(c10::kCPU);
    {
      at::NoGradGuard no_grad;
      const std::vector<at::Tensor> now = b.module.ptr()->buffers();
      for (size_t i = 0; i < now.size(); ++i) const_cast<at::Tensor&>(now[i]).copy_(buffers[i]);
    }
    live.update(b, std::move(next));
  }
  restore(blocks, was);
  return out;
}

std::vector<double> block_memory(std::vector<Block>& blocks, const at::Tensor& x) {
  return chained_eval(blocks, x, [](Block& b, LiveSet& live) {
    double params = 0;
    for (const at::Tensor& p : b.module.ptr()->parameters()) params += static_cast<double>(p.nbytes());
    live.run(b);
    // What a cut after this block sends: every live tensor (skips and masks included).
    return 3 * params + static_cast<double>(total_bytes(live.values())) + 1;
  });
}

}  // namespace pipelab
