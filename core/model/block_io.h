#pragma once
/// Blocks that take and return several named tensors, and skip connections across stages.
///
/// Between blocks lives an ordered set of named tensors, the *live set*. It starts as the
/// model's input, named "x". A block reads the live tensors it names (its forward's
/// arguments, in order) and writes the ones it returns; a name it writes replaces the live
/// tensor of that name or joins the set at its end. What crosses a stage boundary is the
/// live set there, in its order: a chain of one-tensor blocks carries one tensor, as ever.
///
/// A skip connection is a tensor a block *stashes* (returns under a new name) and a later
/// block *pops* (reads and drops from the live set), as torchgpipe's `stash`/`pop` (Kim et
/// al. 2020, section 3.3). Every stage in between carries it on unchanged, and its gradient comes
/// back along the same boundaries (torchgpipe routes it directly through "portals"; we keep
/// the schedule's neighbour-to-neighbour messages, so each executor needs nothing new and the
/// bytes show on every boundary they cross). Other names (a padding mask) simply stay live.
#include <ATen/Tensor.h>

#include <string>
#include <vector>

namespace pipelab {

struct Block;

using Tensors = std::vector<at::Tensor>;

/// What one block reads and writes. The default is the one-tensor block: "x" in, "x" out.
struct BlockIO {
  /// Live tensors passed to the module's forward, in argument order (1 to 4).
  std::vector<std::string> in{"x"};
  /// What the forward returns, in order: a Tensor for one name, a std::vector<Tensor> for
  /// several.
  std::vector<std::string> out{"x"};
  /// Names in `out` that start a skip connection; each must be new and popped later.
  std::vector<std::string> stash;
  /// Names in `in` that end a skip connection here: stashed upstream, dropped afterwards.
  std::vector<std::string> pop;

  /// Only "x" in and out: callable as module.forward(x).
  bool plain() const;
  std::string str() const;  ///< "(x, skip1) -> (x)"
};

/// Reads `in`, writes `out`.
BlockIO reads(std::vector<std::string> in, std::vector<std::string> out = {"x"});
/// Returns "x" and stashes the other outputs `names` (the forward returns {x, names...}).
BlockIO stashes(std::vector<std::string> names);
/// Reads "x" and pops `names` (forward(x, names...) returns x).
BlockIO pops(std::vector<std::string> names);

/// The live set before and after every block of a model, checked. Throws a UserError naming
/// `model`, the block and the fix when a block reads a name that is not live, pops one that
/// no block upstream stashed, stashes a name already live, writes a name twice, when a stash
/// is never popped. ("x" stays live to the end: it cannot be stashed, so never popped.)
struct Dataflow {
  /// live[i]: the names live before block i; live[n]: after the last block.
  std::vector<std::vector<std::string>> live;
  /// Names live before block i that are skip connections in transit.
  std::vector<std::vector<std::string>> skips;
  /// Whether any boundary carries more than "x".
  bool plain() const;
};
Dataflow check_dataflow(const std::vector<std::pair<std::string, BlockIO>>& blocks, const std::string& model);

/// The live tensors while blocks run.
class LiveSet {
 public:
  LiveSet(std::vector<std::string> names, Tensors values);
  /// The model's input alone.
  explicit LiveSet(at::Tensor x) : LiveSet({"x"}, {std::move(x)}) {}
  /// Runs `block` on the tensors it reads and updates the set.
  void run(Block& block);
  /// Updates the set with what `block` returned (`result`, in the order of its outputs).
  void update(const Block& block, Tensors result);
  /// The tensors named `names`, in that order.
  Tensors take(const std::vector<std::string>& names) const;
  const at::Tensor& get(const std::string& name) const;
  const std::vector<std::string>& names() const { return names_; }
  const Tensors& values() const { return values_; }

 private:
  std::vector<std::string> names_;
  Tensors values_;
};

/// Calls the block's module with `args` as separate arguments and returns what it returned
/// (one tensor, or each of a std::vector<Tensor>).
Tensors call_block(Block& block, const Tensors& args);

/// Sum of the bytes of the defined tensors.
int64_t total_bytes(const Tensors& tensors);

}  // namespace pipelab
