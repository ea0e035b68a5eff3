#include "core/stage/stage.h"

#include <ATen/ATen.h>
#include <c10/util/ScopeExit.h>
#include <torch/csrc/autograd/autograd.h>

#include "core/device/compat.h"
#include "core/device/device.h"
#include "core/nn/context.h"
#include "core/nn/document_layout.h"
#include "core/stage/saved_tensors.h"
#include "core/stage/stage_graphs.h"
#include "core/stage/weight_pass.h"
#include "core/util/error.h"

namespace pipelab {

Stage::Stage(StageSpec spec)
    : index_(spec.index), count_(spec.count), replica_(spec.replica), first_(spec.index == 0),
      last_(spec.index + 1 == spec.count), blocks_(std::move(spec.blocks)),
      input_names_(std::move(spec.inputs)), output_names_(std::move(spec.outputs)),
      container_(std::make_shared<torch::nn::Module>("Stage")), loss_(std::move(spec.loss)),
      device_(spec.device), autocast_(autocast_dtype(spec.precision.amp)) {
  if (spec.precision.amp == Amp::Fp16) scaler_ = std::make_unique<LossScaler>(spec.precision.loss_scale);
  PIPELAB_ASSERT(!blocks_.empty(), "stage {} has no blocks", index_);
  PIPELAB_ASSERT(static_cast<bool>(loss_) == is_last(), "stage {}: the loss belongs to the last stage", index_);
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
  if (spec.cuda_graphs) graphs_ = std::make_unique<StageGraphs>(index_, device_);
  packs_block_.assign(blocks_.size(), spec.offload_blocks.empty());
  packs_loss_ = spec.offload_blocks.empty();
  for (size_t i = 0; i < blocks_.size(); ++i) {
    for (const std::string& name : spec.offload_blocks) packs_block_[i] = packs_block_[i] || name == blocks_[i].name;
  }
}

Stage::~Stage() = default;

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
  PIPELAB_ASSERT(it->second.graph_slot < 0, "stage {}: a gradient route cannot use a captured forward", index_);
  PIPELAB_ASSERT(it->second.inputs.size() == 1 && it->second.outputs.size() == 1,
                 "stage {}: a gradient route needs one tensor in and out", index_);
  return {it->second.inputs.front(), it->second.outputs.front(), it->second.target};
}

void Stage::release(int mb) {
  const auto it = saved_.find(mb);
  if (it != saved_.end() && it->second.graph_slot >= 0) graphs_->release(it->second.graph_slot);
  saved_.erase(mb);
}

Tensors Stage::run_training_blocks(Tensors x) {
  std::vector<bool> drew;
  Tensors out = run_blocks(std::move(x), &drew);
  if (draws_.size() != drew.size()) draws_.assign(drew.size(), -1);
  for (size_t i = 0; i < drew.size(); ++i) draws_[i] = std::max(draws_[i], drew[i] ? 1 : 0);
  return out;
}

std::vector<at::Tensor> Stage::drawn_rng_states() const {
  std::vector<bool> keep(generators_.size(), true);
  for (size_t i = 0; i < keep.size() && i < draws_.size(); ++i) keep[i] = draws_[i] != 0;
  return rng_states(keep);
}

Tensors Stage::run_blocks(Tensors x, std::vector<bool>* drew) {
  PIPELAB_ASSERT(x.size() == input_names_.size(), "stage {} received {} tensors for its {} inputs", index_, x.size(),
                 input_names_.size());
  if (channels_last_) {
    for (at::Tensor& t : x) {
      if (t.dim() == 4) t = t.contiguous(at::MemoryFormat::ChannelsLast);
    }
  }
  device::AutocastScope amp(device_.type(), autocast_.value_or(at::kFloat), autocast_.has_value());
  LiveSet live(input_names_, std::move(x));
  if (drew) drew->assign(blocks_.size(), false);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    bool drawn = false;
    {
      nn::GeneratorScope scope(&generators_[i], &drawn);
      std::optional<SavedTensors::PackScope> packing;
      if (packing_ && packs_block_[i]) packing.emplace(packing_);
      live.run(blocks_[i]);
    }
    if (drew) (*drew)[i] = drawn;
  }
  // The loss takes "x"; any other live tensor (a mask) ends with the model.
  return is_last() ? Tensors{live.get("x")} : live.take(output_names_);
}

at::Tensor Stage::run_loss(const at::Tensor& out, const at::Tensor& target, double loss_scale) {
  // Under autocast as PyTorch recommends (losses run in float32 there).
  device::AutocastScope amp(device_.type(), autocast_.value_or(at::kFloat), autocast_.has_value());
  // Ragged text (a document layout in scope): the mean over the predicted targets.
  at::Tensor loss = nn::current_documents() ? loss_->compute_predicted(out, target) : loss_->compute(out, target);
  return loss_scale != 1.0 ? loss * loss_scale : loss;
}

std::vector<at::Tensor> Stage::rng_states() const { return rng_states(std::vector<bool>(generators_.size(), true)); }

std::vector<at::Tensor> Stage::rng_states(const std::vector<bool>& keep) const {
  std::vector<at::Tensor> out(generators_.size());
  for (size_t i = 0; i < generators_.size(); ++i) {
    if (!keep[i]) continue;
    at::Generator& g = const_cast<at::Generator&>(generators_[i]);
    std::lock_guard<std::mutex> lock(g.mutex());
    out[i] = g.get_state();
  }
  return out;
}

void Stage::set_rng_states(const std::vector<at::Tensor>& states) {
  for (size_t i = 0; i < generators_.size(); ++i) {
    if (!states[i].defined()) continue;  // a block that draws nothing (drawn_rng_states)
    std::lock_guard<std::mutex> lock(generators_[i].mutex());
    generators_[i].set_state(states[i]);
  }
}

ForwardResult Stage::forward(int mb, Tensors x_in, const ForwardOptions& options) {
  PIPELAB_ASSERT(!saved_.count(mb), "stage {}: forward of micro-batch {} twice", index_, mb);
  const StageGraphs::OnStream on_stream(graphs_.get());
  const std::string key = graph_key(x_in, options);
  if (!key.empty() && graphs_->warm(key)) return graphed_forward(mb, key, x_in, options);
  // A forward that will be captured later warms up first, as a graphed one: a block that
  // cannot be captured says so now.
  const nn::GraphedGuard graphed(!key.empty());
  Saved s;
  s.warming = key;
  // After stage 0 each floating input is a leaf that collects the gradient to send back.
  s.inputs = std::move(x_in);
  if (!is_first()) {
    for (at::Tensor& t : s.inputs) t = t.detach().requires_grad_(t.is_floating_point());
  }
  s.target = options.target;
  s.loss_scale = options.loss_scale;
  s.checkpointed = options.checkpoint;
  ForwardResult result;
  Tensors out;
  // The blocks pack what they save (run_blocks), and the loss when every block does.
  if (options.offloadable && !options.checkpoint) s.packed = std::make_shared<SavedTensors>();
  if (options.checkpoint) {
    s.rng = drawn_rng_states();
    if (const at::Tensor* documents = nn::current_documents()) s.documents = *documents;
    at::NoGradGuard no_grad;
    out = run_training_blocks(s.inputs);
  } else {
    // Cleared however the blocks end: evaluate() and a recomputation run them too.
    packing_ = s.packed.get();
    const auto cleared = c10::make_scope_exit([this] { packing_ = nullptr; });
    out = run_training_blocks(s.inputs);
  }
  std::optional<SavedTensors::PackScope> packing;
  if (s.packed && packs_loss_) packing.emplace(s.packed.get());
  result.count = out.front().size(0);
  if (is_last()) {
    PIPELAB_ASSERT(options.target.defined(), "stage {} needs targets", index_);
    const at::Tensor loss = run_loss(out.front(), options.target, options.loss_scale);
    packing.reset();
    result.correct = loss_->correct(out.front(), options.target);
    result.loss = loss.detach();
    if (!options.checkpoint) s.outputs = {loss};
  } else {
    packing.reset();
    for (const at::Tensor& t : out) result.activations.push_back(t.detach());
    if (!options.checkpoint) s.outputs = std::move(out);
  }
  saved_.emplace(mb, std::move(s));
  return result;
}

int64_t Stage::offload(int mb) {
  auto it = saved_.find(mb);
  PIPELAB_ASSERT(it != saved_.end() && !it->second.input_done,
                 "stage {}: OFFLOAD of micro-batch {} outside its forward and backward", index_, mb);
  PIPELAB_ASSERT(it->second.graph_slot < 0, "stage {}: a forward replayed as a CUDA graph cannot offload", index_);
  // A checkpointed forward saved nothing: there is nothing to move.
  return it->second.packed ? it->second.packed->offload(device_) : 0;
}

int64_t Stage::reload(int mb) {
  auto it = saved_.find(mb);
  PIPELAB_ASSERT(it != saved_.end() && !it->second.input_done,
                 "stage {}: RELOAD of micro-batch {} outside its forward and backward", index_, mb);
  return it->second.packed ? it->second.packed->reload(device_) : 0;
}

Stage::Root Stage::backward_root(Saved& s, int mb, const Tensors& dy) {
  if (s.checkpointed && !s.recomputed) {
    // Recompute with the generator states of the original forward (same dropout masks),
    // then put the generators back where they were.
    std::vector<bool> drawing(s.rng.size());
    for (size_t i = 0; i < s.rng.size(); ++i) drawing[i] = s.rng[i].defined();
    const std::vector<at::Tensor> now = rng_states(drawing);
    set_rng_states(s.rng);
    std::vector<bool> drew;
    {
      nn::RecomputeGuard recomputing;
      const nn::DocumentScope documents(s.documents);
      at::AutoGradMode grad(true);
      s.outputs = run_blocks(s.inputs, &drew);
      if (is_last()) s.outputs = {run_loss(s.outputs.front(), s.target, s.loss_scale)};
    }
    set_rng_states(now);
    for (size_t i = 0; i < drew.size(); ++i) {
      PIPELAB_ASSERT(!drew[i] || s.rng[i].defined(),
                     "stage {}: block {} drew randomness when recomputed but not in its forward", index_, i);
    }
    s.recomputed = true;
  }
  // fp16: the backward starts from the gradient times this stage's loss scale, and what
  // goes back is unscaled float32 (precision.h).
  const double scale = scaler_ ? scaler_->scale() : 1.0;
  if (is_last()) return {{scaler_ ? s.outputs.front() * scale : s.outputs.front()}, {}};
  PIPELAB_ASSERT(dy.size() == s.outputs.size(), "stage {}: backward of micro-batch {} needs {} gradients, got {}", index_,
                 mb, s.outputs.size(), dy.size());
  Root root;
  for (size_t i = 0; i < dy.size(); ++i) {
    // An output without a gradient (a mask, or one nothing downstream used) is no root.
    if (!dy[i].defined() || !s.outputs[i].requires_grad()) continue;
    root.outputs.push_back(s.outputs[i]);
    root.grads.push_back(root_gradient(s.outputs[i], dy[i]));
  }
  return root;
}

at::Tensor Stage::root_gradient(const at::Tensor& out, const at::Tensor& dy) const {
  at::Tensor g = dy.to(out.device());
  if (scaler_) g = g.to(at::kFloat) * scaler_->scale();
  return g.to(out.scalar_type());
}

Tensors Stage::input_gradients(const Saved& s, const Tensors& grads) const {
  Tensors out;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const at::Tensor& x = s.inputs[i];
    if (!x.requires_grad()) {
      out.emplace_back();
      continue;
    }
    const at::Tensor& dx = grads[i];
    if (!dx.defined()) {
      out.push_back(at::zeros_like(x));
    } else {
      out.push_back(scaler_ ? dx.to(at::kFloat) / scaler_->scale() : dx);
    }
  }
  return out;
}

Tensors Stage::backward(int mb, const Tensors& dy) {
  auto it = saved_.find(mb);
  PIPELAB_ASSERT(it != saved_.end() && !it->second.input_done, "stage {}: backward of micro-batch {} without forward",
                 index_, mb);
  Saved s = std::move(it->second);
  saved_.erase(it);
  const StageGraphs::OnStream on_stream(graphs_.get());
  if (s.graph_slot >= 0) return graphed_backward(s, dy, true, true);
  if (s.packed) s.packed->before_backward(device_, index_, mb);
  const Root root = backward_root(s, mb, dy);
  // On the last stage there are no gradients: the loss starts from 1.
  if (!root.outputs.empty()) torch::autograd::backward(root.outputs, root.grads);
  warmed(s);
  if (is_first()) return {};
  Tensors grads;
  for (const at::Tensor& x : s.inputs) grads.push_back(x.requires_grad() ? x.grad() : at::Tensor());
  return input_gradients(s, grads);
}

Tensors Stage::backward_input(int mb, const Tensors& dy) {
  auto it = saved_.find(mb);
  PIPELAB_ASSERT(it != saved_.end() && !it->second.input_done, "stage {}: I of micro-batch {} without forward", index_,
                 mb);
  Saved& s = it->second;
  const StageGraphs::OnStream on_stream(graphs_.get());
  if (s.packed) s.packed->before_backward(device_, index_, mb);
  if (s.graph_slot >= 0) {
    s.input_done = true;
    s.root_grads = dy;  // W starts from the same gradients
    return graphed_backward(s, dy, true, false);
  }
  Root root = backward_root(s, mb, dy);
  s.roots = std::move(root.outputs);
  s.root_grads = std::move(root.grads);
  s.input_done = true;
  if (is_first()) return {};
  // Only the path to the inputs runs; the graph stays for W (Qi et al. 2024, section 2: B = I + W).
  Tensors wrt;
  for (const at::Tensor& x : s.inputs) {
    if (x.requires_grad()) wrt.push_back(x);
  }
  Tensors found;
  if (!wrt.empty() && !s.roots.empty()) {
    s.weight_pass = std::make_shared<WeightPass>(s.roots, wrt, trained_parameters());
    found = torch::autograd::grad(s.roots, wrt, s.root_grads, /*retain_graph=*/true, /*create_graph=*/false,
                                  /*allow_unused=*/true);
  }
  Tensors grads;
  size_t k = 0;
  for (const at::Tensor& x : s.inputs) grads.push_back(x.requires_grad() && k < found.size() ? found[k++] : at::Tensor());
  return input_gradients(s, grads);
}

void Stage::backward_weight(int mb) {
  auto it = saved_.find(mb);
  PIPELAB_ASSERT(it != saved_.end() && it->second.input_done, "stage {}: W of micro-batch {} before its I", index_, mb);
  Saved s = std::move(it->second);
  saved_.erase(it);
  const StageGraphs::OnStream on_stream(graphs_.get());
  if (s.graph_slot >= 0) {
    graphed_backward(s, s.root_grads, false, true);
    return;
  }
  warmed(s);
  const std::vector<at::Tensor> weights = trained_parameters();
  if (weights.empty() || s.roots.empty()) return;
  // From where each weight's path left the inputs' (kept by I), or the same graph walked
  // again, accumulating into the parameters only: either way the parameter gradients are
  // those a whole B computes, bit for bit (tests/exec).
  if (s.weight_pass) return s.weight_pass->run(s.roots, s.root_grads);
  torch::autograd::backward(s.roots, s.root_grads, /*retain_graph=*/false, /*create_graph=*/false, weights);
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

ForwardResult Stage::evaluate(const Tensors& x, const at::Tensor& target) {
  at::NoGradGuard no_grad;
  ForwardResult result;
  Tensors out = run_blocks(x);
  result.count = out.front().size(0);
  if (is_last()) {
    result.loss = run_loss(out.front(), target, 1.0);
    result.correct = loss_->correct(out.front(), target);
    if (confusion_) {
      const at::Tensor& logits = out.front();
      const int64_t c = logits.size(-1);
      const at::Tensor cell = target.flatten().to(at::kLong) * c + logits.argmax(-1).flatten();
      result.confusion = at::bincount(cell.cpu(), {}, c * c).view({c, c});
    }
  } else {
    result.activations = std::move(out);
  }
  return result;
}

void Stage::set_training(bool training) { container_->train(training); }

}  // namespace pipelab
