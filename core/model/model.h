#pragma once
/// A model is an ordered list of named blocks plus a loss (docs/design.md, "Stages"). Blocks
/// are built lazily from seeds, so a process builds only the blocks of its own stages and
/// every block's initial weights depend only on (seed, block index).
#include <torch/nn/modules/container/any.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config/registry.h"
#include "core/model/block_io.h"
#include "core/model/tensor_names.h"

namespace pipelab {

/// What a model needs to know about its data.
struct DataSpec {
  std::vector<int64_t> input_shape;  ///< one example, e.g. {1, 28, 28} or {784}
  int64_t classes = 0;               ///< values a target takes (the vocabulary, for a language model)
  bool integer_input = false;        ///< token ids (int64) rather than features
  /// The targets of one example: {} for one class label, {T} for one per position (a
  /// language model's next tokens).
  std::vector<int64_t> target_shape;
  /// Ragged text: batches carry a document layout (Batch::documents) and pad or pack their
  /// rows; the model must read it (models/blocks/text.h, text_input).
  bool documents = false;
  /// Predictions per example: the unit of accuracy (top-1 hits / (examples x this)).
  int64_t targets_per_example() const;
  /// The test metric the data is judged by besides accuracy: "" (none), or "mcc" (the
  /// Matthews correlation, GLUE CoLA's metric), computed from the test set's confusion matrix.
  std::string metric;
};

/// The target of a position that predicts nothing (ragged text's padding): the loss and the
/// hit count skip it (nn.CrossEntropyLoss's ignore_index).
constexpr int64_t kIgnoredTarget = -100;
/// The targets of `target` that predict something (on its device: a host tensor is read
/// without waiting).
int64_t predicted_targets(const torch::Tensor& target);

/// A classification loss: mean over the batch's targets, plus a top-1 hit count.
class Loss {
 public:
  virtual ~Loss() = default;
  /// Mean loss over the batch (a 0-d tensor with grad).
  virtual torch::Tensor compute(const torch::Tensor& output, const torch::Tensor& target) const = 0;
  /// The same over the targets that predict something (not kIgnoredTarget), 0 where none
  /// does: what ragged text's batches and their sequence segments take. Default: compute().
  virtual torch::Tensor compute_predicted(const torch::Tensor& output, const torch::Tensor& target) const;
  /// Number of top-1 hits over all targets (0-d int64, no grad); classes on the last axis.
  virtual torch::Tensor correct(const torch::Tensor& output, const torch::Tensor& target) const;
};

/// Cross-entropy on logits [N, classes] with integer targets [N], or on logits
/// [N, T, classes] with targets [N, T] (the mean over all N x T positions, as
/// nn.CrossEntropyLoss on the flattened positions: how a language model's loss is taken).
class CrossEntropyLoss : public Loss {
 public:
  torch::Tensor compute(const torch::Tensor& output, const torch::Tensor& target) const override;
  torch::Tensor compute_predicted(const torch::Tensor& output, const torch::Tensor& target) const override;
};

/// One named block: a module, and the named tensors it reads and writes (block_io.h; by
/// default one tensor "x" in and out).
struct Block {
  Block() = default;
  Block(std::string name_, torch::nn::AnyModule module_, BlockIO io_ = {})
      : name(std::move(name_)), module(std::move(module_)), io(std::move(io_)) {}
  std::string name;
  torch::nn::AnyModule module;
  BlockIO io;
};

/// How to build one block (called under a block-specific seed).
struct BlockRecipe {
  BlockRecipe() = default;
  BlockRecipe(std::string name_, std::function<torch::nn::AnyModule()> make_, BlockIO io_ = {})
      : name(std::move(name_)), make(std::move(make_)), io(std::move(io_)) {}
  std::string name;
  std::function<torch::nn::AnyModule()> make;
  BlockIO io;
  /// Blocks whose recipes share a non-empty key are made by the same code from the same
  /// options (their seeds alone differ): the same parameters' shapes, the same work for the
  /// same inputs. A profile from shapes (core/model/meta_device.h) builds one of them.
  std::string shape_key;
};

/// Two parameters that are one (tied weights, docs/schemes.md, "Notation and optimizers"), named
/// "<block>.<param>" as in a state dict: `second` starts as a copy of `first`, and the two
/// copies' gradients are summed before each update (core/comm/gradient_finish.h), on one
/// stage or across stages alike, so they stay equal.
struct TiedParameter {
  std::string first, second;
};

/// A model before instantiation: block recipes, loss, and named stage splits.
struct ModelDef {
  std::vector<BlockRecipe> blocks;
  std::vector<TiedParameter> ties;
  std::shared_ptr<Loss> loss;
  /// Named balances ("spectrain_4" -> blocks per stage), selectable as `balance: <name>`.
  std::map<std::string, std::vector<int>> named_balances;
  /// How published state dicts name this model's tensors ("torchvision" -> rules onto
  /// "<block>.<param>"), selectable as `init.names: <name>` (core/model/tensor_names.h).
  std::map<std::string, std::vector<NameRule>> published_names;
};

/// The model's live sets (block_io.h), checked; `model` names it in errors.
Dataflow dataflow(const ModelDef& def, const std::string& model);

/// Builds block `index` of `def` with its weights seeded from (seed, index).
Block build_block(const ModelDef& def, size_t index, uint64_t seed);

/// The seed of block `index` under run seed `seed` (splitmix64 of both).
uint64_t block_seed(uint64_t seed, size_t index);

/// "[2, 3]".
std::string shape_text(c10::IntArrayRef sizes);

/// Number of parameters (elements) of a module.
int64_t count_parameters(const torch::nn::Module& module);

/// The options that make a model a miniature of itself for a trial on a CPU: the same blocks
/// (so a plan's cut and its stages hold), each narrower. Option key (under `model.`) -> value.
struct Miniature {
  std::map<std::string, YAML::Node> widths;
  /// Keys that shrink what the model predicts or reads (a language model's vocabulary, to the
  /// 64 words a miniature synthetic dataset has): a proxy run, whose target is in the file's
  /// units, keeps them.
  std::map<std::string, YAML::Node> vocabulary;
};

/// A registered model family (`model: {type: mlp, ...}`).
class ModelFactory : public Component {
 public:
  static constexpr const char* kKind = "model";
  /// Its miniature (the `cpu-mini` preset `plan --emit` writes, `plan --target`'s proxy runs,
  /// tools/plan/plan_report.h). Empty (the default): nothing to narrow, its blocks being
  /// small already or of fixed widths.
  virtual Miniature miniature() const { return {}; }
  /// The blocks and loss for data described by `data`. Mismatches are UserErrors.
  virtual ModelDef define(const DataSpec& data) const = 0;
  /// Whether define() ties parameters (ModelDef::ties), known without the data: the run plan
  /// of `pipelab schedule` and `simulate` needs it for the ALLREDUCE that ties add. A model
  /// that ties says so here too (a run goes by define()'s ties; the tools by this answer).
  virtual bool ties_weights() const { return false; }
  /// Whether a training forward may compute one segment of its sequences at a time
  /// (core/nn/sequence_segment.h: Seq1F1B's and TeraPipe's units), and what a token costs
  /// there: the work per token of what does not attend, in units of the work one query
  /// spends on one key (the cost model of `segmentation: equal_compute`,
  /// core/scheme/sequence_split.h). Nullopt (the default): the model computes whole
  /// sequences only, and a scheme that splits them is refused.
  virtual std::optional<double> segment_token_work() const { return std::nullopt; }
  /// Whether its blocks read a document layout (core/nn/document_layout.h): restart positions
  /// and keep attention within each document. A model that does not cannot train on ragged
  /// text (a dataset's `collate: pad` or `pack`), which the run refuses.
  virtual bool reads_documents() const { return false; }
};

}  // namespace pipelab
