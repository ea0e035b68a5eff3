#include "core/stage/stage.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "core/device/compat.h"
#include "core/device/device.h"
#include "core/nn/context.h"
#include "core/util/error.h"

namespace pipelab {

Stage::Stage(StageSpec spec)
    : index_(spec.index), count_(spec.count), first_(spec.replica || spec.index == 0),
      last_(spec.replica || spec.index + 1 == spec.count), blocks_(std::move(spec.blocks)),
      container_(std::make_shared<torch::nn::Module>("Stage")), loss_(std::move(spec.loss)),
      device_(spec.device), autocast_(autocast_dtype(spec.precision.amp)) {
  if (spec.precision.amp == Amp::Fp16) scaler_ = std::make_unique<LossScaler>(spec.precision.loss_scale);
  PIPELAB_ASSERT(!blocks_.empty(), "stage {} has no blocks", index_);
  PIPELAB_ASSERT(static_cast<bool>(loss_) == is_last(), "stage {}: the loss belongs to the last stage (or replicas)", index_);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    container_->register_module(blocks_[i].name, blocks_[i].module.ptr());
    // Seeded by the block's index in the model, so masks do not depend on the partition.
    generators_.push_back(device::make_generator(device_, block_seed(~spec.seed, spec.first_block + i)));
  }
  container_->to(device_);
  if (spec.channels_last) {
    channels_last_ = true;
    at::NoGradGuard no_grad;
    for (at::Tensor& p : container_->parameters()) {
      if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
}

std::vector<at::Tensor> Stage::block_parameters() const {
  std::vector<at::Tensor> out;
  for (const Block& b : blocks_) {
    for (const at::Tensor& p : b.module.ptr()->parameters()) out.push_back(p);
  }
  return out;
}

void Stage::set_head(const std::string& name, torch::nn::AnyModule head, std::shared_ptr<Loss> loss) {
  PIPELAB_ASSERT(!optimizer_, "stage {}: set the head before the optimizer", index_);
  head_module_ = std::move(head);
  head_ = head_module_.ptr();
  head_loss_ = std::move(loss);
  container_->register_module(name, head_);
  const std::vector<at::Tensor> params = block_parameters();
  head_->to(device_, params.empty() ? at::kFloat : params.front().scalar_type());
}

at::Tensor Stage::head_forward(const at::Tensor& h) {
  device::AutocastScope amp(device_.type(), autocast_.value_or(at::kFloat), autocast_.has_value());
  return head_module_.forward(h);
}

std::vector<at::Tensor> Stage::head_parameters() const { return head_ ? head_->parameters() : std::vector<at::Tensor>(); }

Stage::Forwarded Stage::forwarded(int mb) const {
  const auto it = saved_.find(mb);
  PIPELAB_ASSERT(it != saved_.end(), "stage {}: micro-batch {} is not in flight", index_, mb);
  PIPELAB_ASSERT(!it->second.checkpointed, "stage {}: a gradient route cannot use a checkpointed forward", index_);
  return {it->second.input, it->second.output, it->second.target};
}

void Stage::release(int mb) { saved_.erase(mb); }

at::Tensor Stage::run_blocks(at::Tensor x) {
  if (channels_last_ && x.dim() == 4) x = x.contiguous(at::MemoryFormat::ChannelsLast);
  device::AutocastScope amp(device_.type(), autocast_.value_or(at::kFloat), autocast_.has_value());
  for (size_t i = 0; i < blocks_.size(); ++i) {
    nn::GeneratorScope scope(&generators_[i]);
    x = blocks_[i].module.forward(x);
  }
  return x;
}

at::Tensor Stage::run_loss(const at::Tensor& out, const at::Tensor& target, double loss_scale) {
  // Under autocast as PyTorch recommends (losses run in float32 there).
  device::AutocastScope amp(device_.type(), autocast_.value_or(at::kFloat), autocast_.has_value());
  at::Tensor loss = loss_->compute(out, target);
  return loss_scale != 1.0 ? loss * loss_scale : loss;
}

std::vector<at::Tensor> Stage::rng_states() const {
  std::vector<at::Tensor> out;
  out.reserve(generators_.size());
  for (const at::Generator& g : generators_) {
    std::lock_guard<std::mutex> lock(const_cast<at::Generator&>(g).mutex());
    out.push_back(g.get_state());
  }
  return out;
}

void Stage::set_rng_states(const std::vector<at::Tensor>& states) {
  for (size_t i = 0; i < generators_.size(); ++i) {
    std::lock_guard<std::mutex> lock(generators_[i].mutex());
    generators_[i].set_state(states[i]);
  }
}

ForwardResult Stage::forward(int mb, const at::Tensor& x_in, const ForwardOptions& options) {
  PIPELAB_ASSERT(!saved_.count(mb), "stage {}: forward of micro-batch {} twice", index_, mb);
  Saved s;
  // After stage 0 the input is a leaf that collects the gradient to send back.
  s.input = is_first() ? x_in : x_in.detach().requires_grad_(true);
  s.target = options.target;
  s.loss_scale = options.loss_scale;
  s.checkpointed = options.checkpoint;
  ForwardResult result;
  at::Tensor out;
  if (options.checkpoint) {
    s.rng = rng_states();
    at::NoGradGuard no_grad;
    out = run_blocks(s.input);
  } else {
    out = run_blocks(s.input);
  }
  if (is_last()) {
    PIPELAB_ASSERT(options.target.defined(), "stage {} needs targets", index_);
    const at::Tensor loss = run_loss(out, options.target, options.loss_scale);
    result.correct = loss_->correct(out, options.target);
    result.count = out.size(0);
    result.loss = loss.detach();
    if (!options.checkpoint) s.output = loss;
  } else {
    result.activation = out.detach();
    result.count = out.size(0);
    if (!options.checkpoint) s.output = out;
  }
  saved_.emplace(mb, std::move(s));
  return result;
}

Stage::Root Stage::backward_root(Saved& s, int mb, const at::Tensor& dy) {
  at::Tensor out = s.output;
  if (s.checkpointed && !s.recomputed) {
    // Recompute with the generator states of the original forward (same dropout masks),
    // then put the generators back where they were.
    const std::vector<at::Tensor> now = rng_states();
    set_rng_states(s.rng);
    {
      nn::RecomputeGuard recomputing;
      at::AutoGradMode grad(true);
      out = run_blocks(s.input);
      if (is_last()) out = run_loss(out, s.target, s.loss_scale);
    }
    set_rng_states(now);
    s.output = out;
    s.recomputed = true;
  }
  // fp16: the backward starts from the gradient times this stage's loss scale, and what
  // goes back is unscaled float32 (precision.h).
  const double scale = scaler_ ? scaler_->scale() : 1.0;
  if (is_last()) return {scaler_ ? out * scale : out, at::Tensor()};
  PIPELAB_ASSERT(dy.defined(), "stage {}: backward of micro-batch {} needs a gradient", index_, mb);
  at::Tensor g = dy.to(out.device());
  if (scaler_) g = g.to(at::kFloat) * scale;
  return {out, g.to(out.scalar_type())};
}

at::Tensor Stage::input_gradient(const at::Tensor& dx) const {
  if (!dx.defined()) return {};
  return scaler_ ? dx.to(at::kFloat) / scaler_->scale() : dx;
}

at::Tensor Stage::backward(int mb, const at::Tensor& dy) {
  auto it = saved_.find(mb);
  PIPELAB_ASSERT(it != saved_.end() && !it->second.input_done, "stage {}: backward of micro-batch {} without forward",
                 index_, mb);
  Saved s = std::move(it->second);
  saved_.erase(it);
  const Root root = backward_root(s, mb, dy);
  if (root.grad.defined()) {
    torch::autograd::backward({root.output}, {root.grad});
  } else {
    torch::autograd::backward({root.output});
  }
  if (is_first()) return {};
  return input_gradient(s.input.grad());
}

at::Tensor Stage::backward_input(int mb, const at::Tensor& dy) {
  auto it = saved_.find(mb);
  PIPELAB_ASSERT(it != saved_.end() && !it->second.input_done, "stage {}: I of micro-batch {} without forward", index_,
                 mb);
  Saved& s = it->second;
  const Root root = backward_root(s, mb, dy);
  s.output = root.output;
  s.output_grad = root.grad;
  s.input_done = true;
  if (is_first()) return {};
  // Only the path to the input runs; the graph stays for W (Qi et al. 2024, §2: B = I + W).
  const std::vector<at::Tensor> grads =
      root.grad.defined() ? torch::autograd::grad({root.output}, {s.input}, {root.grad}, /*retain_graph=*/true)
                          : torch::autograd::grad({root.output}, {s.input}, {}, /*retain_graph=*/true);
  return input_gradient(grads.at(0));
}

void Stage::backward_weight(int mb) {
  auto it = saved_.find(mb);
  PIPELAB_ASSERT(it != saved_.end() && it->second.input_done, "stage {}: W of micro-batch {} before its I", index_, mb);
  Saved s = std::move(it->second);
  saved_.erase(it);
  std::vector<at::Tensor> weights;
  for (const at::Tensor& p : parameters()) {
    if (p.requires_grad()) weights.push_back(p);
  }
  if (weights.empty()) return;
  // The same graph walked again, accumulating into the parameters only: the parameter
  // gradients are those a whole B computes, bit for bit (tests/exec).
  torch::autograd::backward({s.output}, s.output_grad.defined() ? std::vector<at::Tensor>{s.output_grad}
                                                                : std::vector<at::Tensor>{},
                            /*retain_graph=*/false, /*create_graph=*/false, weights);
}

void Stage::step(double lr_scale) {
  PIPELAB_ASSERT(optimizer_ != nullptr, "stage {} has no optimizer", index_);
  optimizer_->set_lr(scheduled_lr() * lr_scale);
  if (scaler_) {
    // GradScaler.step + update: skip the whole update when a gradient overflowed.
    const bool finite = scaler_->unscale(parameters());
    scaler_->update(finite);
    if (!finite) {
      optimizer_->zero_grad();
      return;
    }
  }
  optimizer_->step();
  optimizer_->zero_grad();
}

ForwardResult Stage::evaluate(const at::Tensor& x, const at::Tensor& target) {
  at::NoGradGuard no_grad;
  ForwardResult result;
  at::Tensor out = run_blocks(x);
  result.count = out.size(0);
  if (is_last()) {
    result.loss = run_loss(out, target, 1.0);
    result.correct = loss_->correct(out, target);
  } else {
    result.activation = out;
  }
  return result;
}

void Stage::set_training(bool training) { container_->train(training); }

}  // namespace pipelab
