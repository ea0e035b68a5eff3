/// A stage's captured forwards and backwards (stage_graphs.h). How a capture is made, after
/// PyTorch's own recipe for training with graphs (torch.cuda.make_graphed_callables): warm
/// up eagerly, capture the forward on a side stream into a private memory pool, capture each
/// backward from the forward's autograd graph (torch.autograd.grad, graph retained) into the
/// same pool, replay on the caller's stream with the inputs copied into static buffers.
/// What differs: one slot per in-flight micro-batch instead of one graph per callable, since
/// a pipeline runs several forwards before their backwards; each stage captures on a stream
/// of its own, in thread-local capture mode, so that concurrent stages (the threaded
/// executor) neither capture each other's work nor trip over each other's captures.
#include "core/stage/stage_graphs.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <iterator>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/util/error.h"

#ifdef PIPELAB_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/autograd/autograd.h>

#include "core/device/cuda_event.h"
#include "core/device/cuda_generator.h"
#endif

namespace pipelab {

std::string StageGraphs::signature(const Tensors& inputs, const at::Tensor& target, double loss_scale) {
  std::string out;
  auto add = [&out](const at::Tensor& t) {
    if (!t.defined()) {
      out += "-;";
      return;
    }
    fmt::format_to(std::back_inserter(out), "{}", c10::toString(t.scalar_type()));
    for (const int64_t s : t.sizes()) fmt::format_to(std::back_inserter(out), ",{}", s);
    out += '/';
    for (const int64_t s : t.strides()) fmt::format_to(std::back_inserter(out), ",{}", s);
    out += ';';
  };
  for (const at::Tensor& t : inputs) add(t);
  out += '|';
  add(target);
  fmt::format_to(std::back_inserter(out), "|{}", loss_scale);
  return out;
}

void accumulate_gradients(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads) {
  PIPELAB_ASSERT(params.size() == grads.size(), "{} gradients for {} parameters", grads.size(), params.size());
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> fresh, fresh_from, added, added_from;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!grads[i].defined()) continue;
    at::Tensor p = params[i];
    if (p.grad().defined()) {
      added.push_back(p.grad());
      added_from.push_back(grads[i]);
    } else {
      // AccumulateGrad's layout contract: a new gradient takes its parameter's strides.
      p.mutable_grad() = at::empty_strided(p.sizes(), p.strides(), grads[i].options());
      fresh.push_back(p.grad());
      fresh_from.push_back(grads[i]);
    }
  }
  if (!fresh.empty()) at::_foreach_copy_(fresh, fresh_from);
  if (!added.empty()) at::_foreach_add_(added, added_from);
}

#ifdef PIPELAB_WITH_CUDA

namespace {

using Graph = at::cuda::CUDAGraph;

/// One captured backward of a slot: the static root gradients it reads, what it computes.
struct Backward {
  std::unique_ptr<Graph> graph;
  std::vector<at::Tensor> root_grads;
  std::vector<at::Tensor> inputs, weights;  ///< per slot input / weight; undefined where none
};

struct Slot {
  std::string key;
  bool busy = false;
  std::unique_ptr<Graph> forward;
  std::vector<at::Tensor> inputs;
  at::Tensor target;
  std::vector<at::Tensor> outputs;
  int64_t count = 0;
  std::vector<const void*> weights;  ///< the weights' addresses when captured
  std::map<std::string, Backward> backwards;
};

}  // namespace

struct StageGraphs::Impl {
  Impl(int s, const c10::Device& d) : stage(s), device(d) {}
  int stage;
  c10::Device device;
  cudaStream_t raw = nullptr;
  std::set<std::string> warm;
  std::vector<std::unique_ptr<Slot>> slots;
  // OnStream: the caller's stream while the stage works on its own, and the two events
  // that order them (reused: each wait takes the event as last recorded).
  std::optional<c10::cuda::CUDAStream> caller;
  device::CudaEvent entered, left;
  int depth = 0;

  c10::cuda::CUDAStream stream() const { return c10::cuda::getStreamFromExternal(raw, device.index()); }

  /// Runs `body` under a capture into `graph` (sharing `pool` when given) on the stage's
  /// capture stream; a failure ends the capture and says what could not be captured.
  template <class Body>
  void capture(Graph& graph, std::optional<c10::MempoolId_t> pool, const std::vector<at::Generator>& generators,
               const char* what, Body&& body) {
    for (const at::Generator& g : generators) device::register_generator(graph, g);
    c10::cuda::CUDAStreamGuard guard(stream());
    graph.capture_begin(pool.value_or(c10::MempoolId_t{0, 0}), cudaStreamCaptureModeThreadLocal);
    try {
      body();
      graph.capture_end();
    } catch (const std::exception& e) {
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(raw, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
        cudaGraph_t abandoned = nullptr;
        cudaStreamEndCapture(raw, &abandoned);
        if (abandoned) cudaGraphDestroy(abandoned);
      }
      cudaGetLastError();  // the capture's error is reported below, not by the next call
      if (dynamic_cast<const UserError*>(&e)) throw;
      throw UserError(fmt::format(
          "stage {}: run.cuda_graphs could not capture its {}: {}\nA block synchronises with the host (.item(), "
          "a shape read from a tensor) or works on the CPU. Fix: set run.cuda_graphs: false",
          stage, what, e.what()));
    }
  }

  /// The first capture on the stream: cuBLAS gets its handle and workspace for the stream
  /// here, eagerly, not inside a graph's memory pool.
  void warm_stream() {
    c10::cuda::CUDAStreamGuard guard(stream());
    const auto options = at::TensorOptions().device(device);
    for (const at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble}) {
      const at::Tensor a = at::ones({16, 16}, options.dtype(t));
      at::addmm(a, a, a);
    }
    stream().synchronize();
  }
};

StageGraphs::StageGraphs(int stage, const c10::Device& device) : impl_(std::make_unique<Impl>(stage, device)) {
  if (!device.is_cuda()) {
    throw UserError(fmt::format("stage {}: run.cuda_graphs needs a CUDA device, and this stage is on {}. Fix: set "
                                "run.cuda_graphs: false, or run.devices to cuda devices",
                                stage, device.str()));
  }
  c10::cuda::CUDAGuard guard(device);
  // A stream of the stage's own (not one of LibTorch's pool, which hands the same streams
  // out again): nothing else ever queues work on it while it captures.
  if (cudaStreamCreateWithFlags(&impl_->raw, cudaStreamNonBlocking) != cudaSuccess) {
    throw std::runtime_error(fmt::format("stage {}: cannot create a CUDA stream for run.cuda_graphs", stage));
  }
  impl_->warm_stream();
}

StageGraphs::~StageGraphs() {
  if (!impl_) return;
  impl_->slots.clear();
  if (impl_->raw) cudaStreamDestroy(impl_->raw);
}

bool StageGraphs::warm(const std::string& key) const { return impl_->warm.count(key) > 0; }
void StageGraphs::set_warm(const std::string& key) { impl_->warm.insert(key); }
size_t StageGraphs::slots() const { return impl_->slots.size(); }

StageGraphs::Replayed StageGraphs::forward(const std::string& key, const Tensors& x, const at::Tensor& target,
                                           const std::vector<at::Generator>& generators, const Tensors& weights,
                                           bool first, const Body& body) {
  int index = -1;
  for (size_t i = 0; i < impl_->slots.size() && index < 0; ++i) {
    if (!impl_->slots[i]->busy && impl_->slots[i]->key == key) index = static_cast<int>(i);
  }
  if (index < 0) {
    auto made = std::make_unique<Slot>();
    made->key = key;
    for (const at::Tensor& t : x) {
      at::Tensor s = at::empty_like(t);
      // After the first stage a floating input is a leaf that collects the gradient to send back.
      if (!first && s.is_floating_point()) s.requires_grad_(true);
      made->inputs.push_back(s);
    }
    if (target.defined()) made->target = at::empty_like(target);
    for (const at::Tensor& w : weights) made->weights.push_back(w.data_ptr());
    made->forward = std::make_unique<Graph>();
    impl_->capture(*made->forward, std::nullopt, generators, "forward", [&] {
      Produced p = body(made->inputs, made->target);
      made->outputs = std::move(p.outputs);
      made->count = p.count;
    });
    impl_->slots.push_back(std::move(made));
    index = static_cast<int>(impl_->slots.size()) - 1;
  }
  Slot* slot = impl_->slots[static_cast<size_t>(index)].get();
  PIPELAB_ASSERT(slot->weights.size() == weights.size(), "stage {}: {} weights, {} when captured", impl_->stage,
                 weights.size(), slot->weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i].data_ptr() != slot->weights[i]) {
      throw UserError(fmt::format(
          "stage {}: run.cuda_graphs replays captured kernels on the weights' memory, but weight {} moved since its "
          "forward was captured (something assigned a new tensor instead of updating it in place). Fix: set "
          "run.cuda_graphs: false",
          impl_->stage, i));
    }
  }
  {
    // Into the static buffers' storage without bumping their version counters: the captured
    // autograd graph saved these tensors at version 0 and checks that when a backward is
    // captured from it (variable_data() shares the storage under a counter of its own).
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < x.size(); ++i) slot->inputs[i].variable_data().copy_(x[i]);
    if (target.defined()) slot->target.variable_data().copy_(target);
  }
  slot->forward->replay();
  slot->busy = true;
  Replayed out;
  out.slot = index;
  out.inputs = slot->inputs;
  out.outputs = slot->outputs;
  out.count = slot->count;
  for (const at::Tensor& t : slot->outputs) out.copies.push_back(t.detach().clone());
  return out;
}

StageGraphs::Gradients StageGraphs::backward(int slot_index, const std::vector<size_t>& roots, const Tensors& grads,
                                             const Tensors& weights, bool wrt_inputs, bool wrt_weights) {
  Slot& slot = *impl_->slots.at(static_cast<size_t>(slot_index));
  PIPELAB_ASSERT(slot.busy, "stage {}: backward of slot {}, which holds no forward", impl_->stage, slot_index);
  PIPELAB_ASSERT(roots.size() == grads.size(), "{} roots, {} gradients", roots.size(), grads.size());
  std::string key = fmt::format("{}{}", wrt_inputs ? 'I' : '-', wrt_weights ? 'W' : '-');
  for (const size_t r : roots) key += fmt::format(",{}", r);
  Gradients out;
  out.inputs.resize(slot.inputs.size());
  out.weights.resize(weights.size());
  // What the graph differentiates: the grad-requiring inputs, the weights, or both.
  std::vector<at::Tensor> wrt;
  std::vector<std::pair<bool, size_t>> where;  // (is a weight, index)
  for (size_t i = 0; wrt_inputs && i < slot.inputs.size(); ++i) {
    if (slot.inputs[i].requires_grad()) wrt.push_back(slot.inputs[i]), where.emplace_back(false, i);
  }
  for (size_t i = 0; wrt_weights && i < weights.size(); ++i) {
    if (weights[i].requires_grad()) wrt.push_back(weights[i]), where.emplace_back(true, i);
  }
  if (wrt.empty() || roots.empty()) return out;
  auto it = slot.backwards.find(key);
  if (it == slot.backwards.end()) {
    Backward b;
    std::vector<at::Tensor> outputs;
    for (size_t k = 0; k < roots.size(); ++k) {
      outputs.push_back(slot.outputs.at(roots[k]));
      b.root_grads.push_back(at::empty_like(grads[k]));
    }
    b.inputs.resize(slot.inputs.size());
    b.weights.resize(weights.size());
    b.graph = std::make_unique<Graph>();
    impl_->capture(*b.graph, slot.forward->pool(), {}, "backward", [&] {
      // Retained: a later capture (W after I) walks the same graph; its saved tensors live
      // in the pool for the replays anyway.
      const std::vector<at::Tensor> found =
          torch::autograd::grad(outputs, wrt, b.root_grads, /*retain_graph=*/true, /*create_graph=*/false,
                                /*allow_unused=*/true);
      for (size_t k = 0; k < found.size(); ++k) (where[k].first ? b.weights : b.inputs)[where[k].second] = found[k];
    });
    it = slot.backwards.emplace(key, std::move(b)).first;
  }
  Backward& b = it->second;
  {
    at::NoGradGuard no_grad;
    for (size_t k = 0; k < grads.size(); ++k) b.root_grads[k].variable_data().copy_(grads[k]);
  }
  b.graph->replay();
  for (size_t i = 0; i < b.inputs.size(); ++i) {
    if (b.inputs[i].defined()) out.inputs[i] = b.inputs[i].clone();
  }
  out.weights = b.weights;
  return out;
}

void StageGraphs::release(int slot) { impl_->slots.at(static_cast<size_t>(slot))->busy = false; }

StageGraphs::OnStream::OnStream(StageGraphs* graphs) : graphs_(graphs) {
  if (!graphs_ || graphs_->impl_->depth++ > 0) return;
  Impl& g = *graphs_->impl_;
  g.caller = c10::cuda::getCurrentCUDAStream(g.device.index());
  g.entered.record(*g.caller);
  g.entered.block(g.stream());
  c10::cuda::setCurrentCUDAStream(g.stream());
}

StageGraphs::OnStream::~OnStream() {
  if (!graphs_ || --graphs_->impl_->depth > 0) return;
  Impl& g = *graphs_->impl_;
  g.left.record(g.stream());
  g.left.block(*g.caller);
  c10::cuda::setCurrentCUDAStream(*g.caller);
}

#else

struct StageGraphs::Impl {};

StageGraphs::StageGraphs(int stage, const c10::Device& device) {
  throw UserError(fmt::format("stage {}: run.cuda_graphs needs CUDA, and this pipelab was built against a LibTorch "
                              "without it. Fix: set run.cuda_graphs: false",
                              stage));
}
StageGraphs::~StageGraphs() = default;
bool StageGraphs::warm(const std::string&) const { return false; }
void StageGraphs::set_warm(const std::string&) {}
size_t StageGraphs::slots() const { return 0; }
StageGraphs::Replayed StageGraphs::forward(const std::string&, const Tensors&, const at::Tensor&,
                                           const std::vector<at::Generator>&, const Tensors&, bool, const Body&) {
  return {};
}
StageGraphs::Gradients StageGraphs::backward(int, const std::vector<size_t>&, const Tensors&, const Tensors&, bool,
                                             bool) {
  return {};
}
void StageGraphs::release(int) {}
StageGraphs::OnStream::OnStream(StageGraphs* graphs) : graphs_(graphs) {}
StageGraphs::OnStream::~OnStream() = default;

#endif

}  // namespace pipelab
