#pragma once
/// `run.cuda_graphs`: a stage's training forwards and backwards captured once as CUDA graphs
/// and replayed, so that a step launches a few graphs instead of one kernel per operator
/// (docs/gpu.md, "CUDA graphs"). A pipeline's schedule is static, so the shapes a stage sees
/// repeat from step to step: the first forward and backward of each input signature run
/// eagerly (they warm up cuDNN, cuBLAS and the caching allocator), later ones are captured
/// on first use and replayed.
///
/// Captured work is keyed by *slot*, not by micro-batch: a slot holds one captured forward
/// (its static inputs, its outputs and the saved activations in the graph's private memory
/// pool) and the backwards captured from it, and is busy from its forward until its backward
/// is done. A forward takes the first free slot of its signature, or captures a new one, so
/// a stage holds as many slots as micro-batches it keeps in flight (GPipe: all of them;
/// 1F1B: at most the number of stages), the same activations eager execution keeps.
///
/// The numbers are those of the eager run, bit for bit: the same kernels run on the same
/// inputs; the parameters' gradients come out of the graph and are accumulated as LibTorch's
/// AccumulateGrad would (copied in for the first micro-batch, added after); dropout draws from
/// the blocks' own generators, registered with each graph, at the same Philox offsets
/// (tests/gpu/gpu_graphs_test.cpp holds this for every scheme kind).
///
/// This header is CUDA-free: without CUDA the class exists but refuses to be made.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pipelab {

class StageGraphs {
 public:
  using Tensors = std::vector<at::Tensor>;
  /// What a captured forward computes from the slot's static inputs and target: the stage's
  /// outbound tensors with their autograd graph, or on the last stage {loss, correct}; and
  /// the micro-batch's example count.
  struct Produced {
    Tensors outputs;
    int64_t count = 0;
  };
  using Body = std::function<Produced(const Tensors& inputs, const at::Tensor& target)>;

  /// `stage` names the stage in messages. Refuses a device that is not CUDA.
  StageGraphs(int stage, const c10::Device& device);
  ~StageGraphs();
  StageGraphs(const StageGraphs&) = delete;
  StageGraphs& operator=(const StageGraphs&) = delete;

  /// The signature a forward is captured for: the inputs' shapes, dtypes, layouts and which
  /// need a gradient, the target's, and the loss scale.
  static std::string signature(const Tensors& inputs, const at::Tensor& target, double loss_scale);

  /// True once a forward and backward of `key` ran eagerly (the warm-up).
  bool warm(const std::string& key) const;
  /// Marks `key`'s eager forward and backward as done.
  void set_warm(const std::string& key);

  /// A replayed forward: the slot that holds it, the slot's static inputs (grad-requiring
  /// leaves after the first stage) and outputs (with their autograd graph), and detached
  /// copies of the outputs for the caller to keep.
  struct Replayed {
    int slot = -1;
    Tensors inputs, outputs, copies;
    int64_t count = 0;
  };
  /// The forward of `x` (and `target`) through a free slot of `key`, captured first if none
  /// is free. `generators`: those the body draws from (registered with the graph);
  /// `weights`: the stage's parameters, which must stay where they were when captured;
  /// `first`: the first stage, whose inputs need no gradient.
  Replayed forward(const std::string& key, const Tensors& x, const at::Tensor& target,
                   const std::vector<at::Generator>& generators, const Tensors& weights, bool first,
                   const Body& body);

  /// The backward of `slot`'s forward from its outputs `roots` with gradients `grads`:
  /// returns copies of the gradients of the slot's grad-requiring inputs (when `wrt_inputs`;
  /// undefined for one with none) and the gradients of `weights` (when `wrt_weights`;
  /// views of the graph's buffers, valid until the slot's next backward; undefined for a
  /// weight with none). Captured on first use per (roots, what it computes).
  struct Gradients {
    Tensors inputs, weights;
  };
  Gradients backward(int slot, const std::vector<size_t>& roots, const Tensors& grads, const Tensors& weights,
                     bool wrt_inputs, bool wrt_weights);
  /// Frees `slot` for the next forward of its signature.
  void release(int slot);

  /// Slots captured so far (all signatures).
  size_t slots() const;

  /// While alive, the calling thread queues its work on the stage's device to the stream the
  /// graphs are captured on, after what its own stream had queued, and its own stream waits
  /// for that work at the end. A stage's eager work and its captures must share one stream:
  /// autograd keeps a parameter's gradient accumulator on the stream the accumulator was
  /// made on, and an eager forward on another stream (the legacy default stream, say)
  /// would make a captured backward wait on a stream outside its capture. Null: nothing.
  class OnStream {
   public:
    explicit OnStream(StageGraphs* graphs);
    ~OnStream();
    OnStream(const OnStream&) = delete;
    OnStream& operator=(const OnStream&) = delete;

   private:
    StageGraphs* graphs_;
  };

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Accumulates `grads` into the `.grad` of `params` as LibTorch's AccumulateGrad does: a
/// copy in the parameter's layout where it has none, an in-place add where it has one
/// (one multi-tensor launch each); undefined gradients are skipped.
void accumulate_gradients(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads);

}  // namespace pipelab
