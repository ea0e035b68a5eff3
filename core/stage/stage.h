#pragma once
/// A stage owns a consecutive run of blocks, its device, its optimizer and what it keeps
/// per in-flight micro-batch. It offers forward(mb, x), backward(mb, dy) -> dx and step(),
/// and knows nothing about schemes (docs/design.md, "Stages"). x, dy and dx are the tensors
/// crossing its boundaries (core/model/block_io.h): one each for a chain of one-tensor
/// blocks, with one-tensor overloads for that case.
#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/optim/optimizer.h"
#include "core/stage/precision.h"

namespace pipelab {

class SavedTensors;
class StageGraphs;
class WeightPass;

/// How a forward runs.
struct ForwardOptions {
  /// Keep only the input and RNG states; recompute the forward inside backward.
  bool checkpoint = false;
  /// Keep what autograd saves where OFFLOAD can move it to host memory (saved_tensors.h):
  /// the schedule offloads this micro-batch. Ignored with `checkpoint` (nothing is saved).
  bool offloadable = false;
  /// On the last stage: the targets, and the factor applied to this micro-batch's mean
  /// loss (its share of the mini-batch, so gradients add up to the mini-batch mean).
  at::Tensor target;
  double loss_scale = 1.0;
};

/// What a forward produced: the activations to send on, or on the last stage the loss.
struct ForwardResult {
  Tensors activations;    ///< detached outputs, in the outbound boundary's order (not on the last stage)
  /// The first activation: the only one of a one-tensor boundary.
  at::Tensor activation() const { return activations.empty() ? at::Tensor() : activations.front(); }
  at::Tensor loss;        ///< detached scaled mean loss (last stage)
  at::Tensor correct;     ///< top-1 hits (last stage)
  int64_t count = 0;      ///< examples in the micro-batch
  at::Tensor confusion;   ///< evaluation with set_confusion: [C, C] target x prediction counts
};

/// Everything a stage is made of.
struct StageSpec {
  int index = 0;
  int count = 1;
  std::vector<Block> blocks;
  size_t first_block = 0;         ///< model index of blocks[0]
  /// The live tensors' names at the stage's input and output (core/model/block_io.h).
  std::vector<std::string> inputs{"x"}, outputs{"x"};
  std::shared_ptr<Loss> loss;     ///< non-null only on the last stage
  c10::Device device = c10::kCPU;
  uint64_t seed = 0;              ///< run seed; block i's generator is seeded from (seed, i)
  /// Which replica of the pipeline the stage belongs to (partition.replicas; 0 without).
  int replica = 0;
  /// Mixed precision (`run.amp`): the autocast dtype of forwards, and fp16's loss scaler.
  Precision precision;
  /// 4-D parameters and inputs in channels-last memory layout (`run.channels_last`).
  bool channels_last = false;
  /// Training forwards and backwards captured as CUDA graphs and replayed
  /// (`run.cuda_graphs`, core/stage/stage_graphs.h); CUDA devices only.
  bool cuda_graphs = false;
  /// partition.offload.blocks: the blocks whose saved activations an offloaded forward
  /// keeps movable (empty: every block, and the loss).
  std::vector<std::string> offload_blocks;
};

class Stage {
 public:
  explicit Stage(StageSpec spec);
  ~Stage();

  int index() const { return index_; }
  int count() const { return count_; }
  int replica() const { return replica_; }
  /// Takes its input from the data (no gradient to send back).
  bool is_first() const { return first_; }
  /// Computes the loss.
  bool is_last() const { return last_; }
  /// Needs the targets in its forward: the loss, or an auxiliary head.
  bool needs_target() const { return last_ || head_ != nullptr; }
  /// Evaluation also counts the confusion matrix (for a metric such as the Matthews
  /// correlation, DataSpec::metric); the last stage only.
  void set_confusion(bool on) { confusion_ = on; }
  const c10::Device& device() const { return device_; }

  /// Container of the blocks (and the head); parameter names are "<block>.<param>".
  torch::nn::Module& module() { return *container_; }
  const std::vector<Block>& blocks() const { return blocks_; }
  /// Names of the tensors the stage receives and sends (its boundaries' live sets).
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  /// Every parameter the stage's optimizer updates: the blocks', then the head's.
  std::vector<at::Tensor> parameters() const { return container_->parameters(); }
  /// Their names, in parameters() order: "<block>.<path in the block>" ("layer3.attention.
  /// q_linear.weight"), the head's under its name.
  std::vector<std::string> parameter_names() const { return container_->named_parameters().keys(); }
  /// The blocks' parameters only.
  std::vector<at::Tensor> block_parameters() const;

  /// Attaches an auxiliary head (interlocking backprop) named `name` with its loss; call
  /// before set_optimizer so that the head's parameters are optimized with the stage's.
  void set_head(const std::string& name, torch::nn::AnyModule head, std::shared_ptr<Loss> loss);
  bool has_head() const { return head_ != nullptr; }
  at::Tensor head_forward(const at::Tensor& h);
  const Loss& head_loss() const { return *head_loss_; }
  std::vector<at::Tensor> head_parameters() const;

  void set_optimizer(std::unique_ptr<Optimizer> optimizer) {
    optimizer_ = std::move(optimizer);
    base_lr_ = optimizer_->lr();
  }
  Optimizer& optimizer() { return *optimizer_; }
  /// The LR to use for the update after `steps` updates (set by the runner).
  void set_lr_schedule(std::function<double(int64_t)> lr_at) { lr_at_ = std::move(lr_at); }

  /// Training forward of micro-batch `mb`; keeps what backward needs.
  ForwardResult forward(int mb, Tensors x, const ForwardOptions& options = {});
  ForwardResult forward(int mb, const at::Tensor& x, const ForwardOptions& options = {}) {
    return forward(mb, Tensors{x}, options);
  }
  /// Backward of micro-batch `mb`; `dy` are the gradients of the outputs (none on the last
  /// stage, which starts from its loss; undefined for an output without one). Returns dx
  /// (none on the first stage; undefined for an input that is not floating point).
  Tensors backward(int mb, const Tensors& dy);
  at::Tensor backward(int mb, const at::Tensor& dy) { return first_of(backward(mb, one(dy))); }
  /// The backward split in two (zero-bubble schedules): I computes and returns dx only,
  /// keeping the graph; W then accumulates the parameters' gradients and drops the
  /// micro-batch. I then W leaves the same gradients as B.
  Tensors backward_input(int mb, const Tensors& dy);
  at::Tensor backward_input(int mb, const at::Tensor& dy) { return first_of(backward_input(mb, one(dy))); }
  void backward_weight(int mb);
  /// One optimizer update with the scheduled LR (times `lr_scale`), then the gradients are
  /// dropped.
  void step(double lr_scale = 1.0);
  /// The LR the next update will use (before any scale): what a predictor that looks ahead
  /// should assume.
  double scheduled_lr() const { return lr_at(optimizer_->steps()); }
  /// The LR the update after `steps` updates will use: a predictor that simulates several
  /// future updates reads the schedule's future LRs here (FTPipe's `sched_aware`).
  double lr_at(int64_t steps) const { return lr_at_ ? lr_at_(steps) : base_lr_; }
  /// Evaluation forward (no grad, no saved state); on the last stage also the loss.
  ForwardResult evaluate(const Tensors& x, const at::Tensor& target = {});
  ForwardResult evaluate(const at::Tensor& x, const at::Tensor& target = {}) { return evaluate(Tensors{x}, target); }

  /// Train or eval mode of every block.
  void set_training(bool training);
  /// The autocast dtype of this stage's forwards (nullopt: full precision).
  std::optional<at::ScalarType> autocast() const { return autocast_; }
  /// The fp16 loss scaler (null unless `run.amp: fp16`).
  LossScaler* loss_scaler() { return scaler_.get(); }
  const LossScaler* loss_scaler() const { return scaler_.get(); }

  /// OFFLOAD: moves what autograd saved for in-flight micro-batch `mb` (a forward run with
  /// ForwardOptions::offloadable) to host memory, where nothing else holds it; returns the
  /// bytes moved. RELOAD brings them back to the stage's device before its backward; returns
  /// the bytes. A backward that finds activations still away fails.
  int64_t offload(int mb);
  int64_t reload(int mb);

  /// Micro-batches whose forward ran and whose backward has not.
  size_t in_flight() const { return saved_.size(); }
  /// run.cuda_graphs: the forwards captured so far (one per micro-batch the stage keeps in
  /// flight, per input signature); 0 without graphs.
  size_t captured_forwards() const;

  /// What the training forward of in-flight micro-batch `mb` kept, for gradient routes
  /// that do their own backward: the input (a grad-requiring leaf after the first stage),
  /// the output with its graph (the loss on the last stage), and the targets. Only for
  /// one-tensor boundaries.
  struct Forwarded {
    at::Tensor input, output, target;
  };
  Forwarded forwarded(int mb) const;
  /// Drops what micro-batch `mb`'s forward kept (a route's backward is done with it).
  void release(int mb);

  /// States of the blocks' generators (for checkpoints and recomputation).
  std::vector<at::Tensor> rng_states() const;
  void set_rng_states(const std::vector<at::Tensor>& states);

 private:
  bool confusion_ = false;
  struct Saved {
    Tensors inputs;                   ///< what the blocks received (grad-requiring leaves after stage 0)
    Tensors outputs;                  ///< outputs (or {loss} on the last stage) with their graph
    /// The states of the generators its blocks draw from, for a checkpointed forward
    /// (undefined for a block that draws none: a CPU generator's state is 5 KB).
    std::vector<at::Tensor> rng;
    /// The document layout it read (ragged text), for its recomputation.
    at::Tensor documents;
    bool checkpointed = false;
    at::Tensor target;
    double loss_scale = 1.0;
    bool recomputed = false;  ///< a checkpointed forward was recomputed (by I)
    bool input_done = false;  ///< I ran; W comes next
    /// Where I started: the outputs with a gradient and those gradients (none on the last
    /// stage, which starts from its loss).
    Tensors roots, root_grads;
    /// What W needs from I (stage/weight_pass.h); null where W walks the whole graph.
    std::shared_ptr<WeightPass> weight_pass;
    /// run.cuda_graphs: the slot that replayed this forward (-1: it ran eagerly), and for
    /// an eager one the signature it warms up (empty: none). I keeps the raw gradients
    /// for W in `root_grads`.
    int graph_slot = -1;
    std::string warming;
    /// What autograd saved, where OFFLOAD can move it (ForwardOptions::offloadable; null
    /// otherwise).
    std::shared_ptr<SavedTensors> packed;
  };
  /// Where a backward starts: the outputs (or scaled loss) that have gradients, and those.
  struct Root {
    Tensors outputs, grads;
  };
  Root backward_root(Saved& s, int mb, const Tensors& dy);
  /// dx as sent back from the inputs' gradients (unscaled under fp16; zeros for a floating
  /// input that got none).
  Tensors input_gradients(const Saved& s, const Tensors& grads) const;
  static Tensors one(const at::Tensor& t) { return t.defined() ? Tensors{t} : Tensors{}; }
  static at::Tensor first_of(const Tensors& t) { return t.empty() ? at::Tensor() : t.front(); }

  /// The blocks under the stage's autocast setting: the outbound tensors, or on the last
  /// stage {x} for the loss. `drew`, when given, gets per block whether it drew randomness.
  Tensors run_blocks(Tensors x, std::vector<bool>* drew = nullptr);
  /// A training forward's blocks, learning which draw randomness (draws_).
  Tensors run_training_blocks(Tensors x);
  /// The states of the generators a recomputation must replay: those of the blocks that
  /// draw, or may (not run in training yet); undefined for the others.
  std::vector<at::Tensor> drawn_rng_states() const;
  /// The states of the generators `keep` marks; undefined for the others.
  std::vector<at::Tensor> rng_states(const std::vector<bool>& keep) const;
  at::Tensor run_loss(const at::Tensor& out, const at::Tensor& target, double loss_scale);
  /// The gradient a backward starts from at output `out`, given the next stage's `dy`
  /// (fp16: scaled by this stage's loss scale, precision.h).
  at::Tensor root_gradient(const at::Tensor& out, const at::Tensor& dy) const;

  // run.cuda_graphs (stage_graphed.cpp): a forward replayed through a captured slot, and
  // its backward (the inputs' gradients and/or the weights', accumulated into .grad).
  ForwardResult graphed_forward(int mb, const std::string& key, const Tensors& x, const ForwardOptions& options);
  Tensors graphed_backward(Saved& s, const Tensors& dy, bool inputs, bool weights);
  /// The signature a forward is captured under, or empty when it runs eagerly for good.
  std::string graph_key(const Tensors& x, const ForwardOptions& options) const;
  /// An eager forward and backward of `s` warmed its signature up.
  void warmed(const Saved& s);
  /// The generators of the blocks that draw randomness (or may: not run yet).
  std::vector<at::Generator> drawing_generators() const;
  /// The parameters that get gradients, in parameters() order.
  std::vector<at::Tensor> trained_parameters() const;

  int index_, count_, replica_;
  bool first_, last_;
  std::vector<Block> blocks_;
  std::vector<std::string> input_names_, output_names_;
  std::shared_ptr<torch::nn::Module> container_;
  std::shared_ptr<Loss> loss_;
  torch::nn::AnyModule head_module_;
  std::shared_ptr<torch::nn::Module> head_;
  std::shared_ptr<Loss> head_loss_;
  c10::Device device_;
  std::vector<at::Generator> generators_;  ///< one per block (nn/context.h)
  /// Per block: 1 once a training forward of it drew randomness (dropout), 0 once one ran
  /// without, -1 before any ran.
  std::vector<int> draws_;
  std::unique_ptr<Optimizer> optimizer_;
  std::function<double(int64_t)> lr_at_;
  double base_lr_ = 0;  ///< the optimizer's LR when there is no schedule
  std::map<int, Saved> saved_;
  std::optional<at::ScalarType> autocast_;
  std::unique_ptr<LossScaler> scaler_;
  bool channels_last_ = false;
  std::unique_ptr<StageGraphs> graphs_;
  /// Per block, whether an offloaded forward packs what it saves; and whether the loss does.
  std::vector<bool> packs_block_;
  bool packs_loss_ = true;
  /// While a forward that offloads runs: where its blocks' saved tensors go.
  SavedTensors* packing_ = nullptr;
};

}  // namespace pipelab
