/// The stage's side of `run.cuda_graphs` (core/stage/stage_graphs.h holds the captures): which
/// forwards are captured, what a captured forward computes, and how its backward's results
/// become what an eager backward leaves (the same dx, the same accumulated .grad).
#include <ATen/ATen.h>

#include "core/nn/context.h"
#include "core/nn/document_layout.h"
#include "core/nn/sequence_segment.h"
#include "core/stage/stage.h"
#include "core/stage/stage_graphs.h"
#include "core/util/error.h"

namespace pipelab {

std::string Stage::graph_key(const Tensors& x, const ForwardOptions& options) const {
  // A checkpointed forward keeps no activations and recomputes them inside its backward:
  // it stays eager.
  if (!graphs_ || options.checkpoint) return {};
  if (nn::current_segment() != nullptr) {
    throw UserError(fmt::format(
        "stage {}: run.cuda_graphs cannot capture a forward over a segment of its sequences: each segment reads "
        "what the earlier ones left on the host (the sequence-level schemes, seq1f1b and terapipe). Fix: set "
        "run.cuda_graphs: false",
        index_));
  }
  if (nn::current_documents() != nullptr) {
    throw UserError(fmt::format(
        "stage {}: run.cuda_graphs cannot capture a forward over ragged text: each micro-batch has its own "
        "length and document layout (dataset collate pad or pack). Fix: set run.cuda_graphs: false",
        index_));
  }
  return StageGraphs::signature(x, options.target, options.loss_scale);
}

size_t Stage::captured_forwards() const { return graphs_ ? graphs_->slots() : 0; }

void Stage::warmed(const Saved& s) {
  if (!s.warming.empty()) graphs_->set_warm(s.warming);
}

std::vector<at::Generator> Stage::drawing_generators() const {
  std::vector<at::Generator> out;
  for (size_t i = 0; i < generators_.size(); ++i) {
    if (i >= draws_.size() || draws_[i] != 0) out.push_back(generators_[i]);
  }
  return out;
}

std::vector<at::Tensor> Stage::trained_parameters() const {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : parameters()) {
    if (p.requires_grad()) out.push_back(p);
  }
  return out;
}

ForwardResult Stage::graphed_forward(int mb, const std::string& key, const Tensors& x, const ForwardOptions& options) {
  const nn::GraphedGuard graphed;
  const bool last = is_last();
  PIPELAB_ASSERT(!last || options.target.defined(), "stage {} needs targets", index_);
  const double loss_scale = options.loss_scale;
  // What the eager forward computes (Stage::forward), on the slot's static tensors.
  const StageGraphs::Body body = [this, last, loss_scale](const Tensors& in, const at::Tensor& target) {
    StageGraphs::Produced p;
    Tensors out = run_training_blocks(in);
    p.count = out.front().size(0);
    if (!last) {
      p.outputs = std::move(out);
    } else {
      const at::Tensor loss = run_loss(out.front(), target, loss_scale);
      p.outputs = {loss, loss_->correct(out.front(), target)};
    }
    return p;
  };
  StageGraphs::Replayed r =
      graphs_->forward(key, x, options.target, drawing_generators(), trained_parameters(), is_first(), body);
  Saved s;
  s.inputs = r.inputs;
  s.outputs = last ? Tensors{r.outputs.front()} : r.outputs;
  s.target = options.target;
  s.loss_scale = loss_scale;
  s.graph_slot = r.slot;
  ForwardResult result;
  result.count = r.count;
  if (last) {
    result.loss = r.copies.at(0);
    result.correct = r.copies.at(1);
  } else {
    result.activations = std::move(r.copies);
  }
  saved_.emplace(mb, std::move(s));
  return result;
}

Tensors Stage::graphed_backward(Saved& s, const Tensors& dy, bool inputs, bool weights) {
  std::vector<size_t> roots;
  Tensors grads;
  if (is_last()) {
    // The loss starts from 1 (times fp16's loss scale), as autograd's implicit gradient.
    roots = {0};
    grads = {at::full_like(s.outputs.front(), scaler_ ? scaler_->scale() : 1.0)};
  } else {
    PIPELAB_ASSERT(dy.size() == s.outputs.size(), "stage {}: a backward needs {} gradients, got {}", index_,
                   s.outputs.size(), dy.size());
    for (size_t i = 0; i < dy.size(); ++i) {
      if (!dy[i].defined() || !s.outputs[i].requires_grad()) continue;
      roots.push_back(i);
      grads.push_back(root_gradient(s.outputs[i], dy[i]));
    }
  }
  const std::vector<at::Tensor> params = trained_parameters();
  const bool wrt_inputs = inputs && !is_first();
  const StageGraphs::Gradients g = graphs_->backward(s.graph_slot, roots, grads, params, wrt_inputs, weights);
  if (weights) {
    accumulate_gradients(params, g.weights);
    graphs_->release(s.graph_slot);
  }
  if (!wrt_inputs) return {};
  return input_gradients(s, g.inputs);
}

}  // namespace pipelab
