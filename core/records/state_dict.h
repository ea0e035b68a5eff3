#pragma once
/// The model's state dict across stages: "<block>.<param>" for parameters and buffers, as
/// Python's nn.Sequential of named blocks would name them, so torch.load reads it and
/// model.load_state_dict accepts it.
#include <string>
#include <vector>

#include "core/io/pt_file.h"
#include "core/stage/stage.h"

namespace pipelab {

/// Parameters and buffers of all local stages, on the CPU, in block order.
TensorDict model_state(const std::vector<Stage*>& stages);

/// What load_model_state left out (non-strict loads).
struct LoadReport {
  size_t loaded = 0;                    ///< the model's tensors copied from the file
  std::vector<std::string> unexpected;  ///< in the file, not in the model: ignored
  std::vector<std::string> missing;     ///< in the model, not in the file: initial values kept
  std::vector<std::string> dropped;     ///< in the file, dropped by an init.names rule
  /// In both with different shapes, skipped (init.skip_mismatched): "name (file [..], model [..])"
  std::vector<std::string> skipped;
  /// One line for the log, naming `file`: how many tensors were loaded, ignored and kept.
  std::string describe(const std::string& file) const;
};

/// Copies `state` into the stages' parameters and buffers, as PyTorch's
/// load_state_dict(strict): a shape mismatch is always a UserError; with `strict`, so is
/// any entry the file has and the model lacks or the other way round (the message lists
/// exactly those names); without it they are ignored and reported. A file none of whose
/// entries the model has is a UserError either way: a non-strict load that loads nothing
/// would train from scratch while the experiment says it starts from the file.
/// With `skip_mismatched`, a tensor whose shape differs keeps its initial value and is
/// reported (fine-tuning a published model onto another head: Hugging Face's
/// ignore_mismatched_sizes) instead of being an error.
LoadReport load_model_state(const std::vector<Stage*>& stages, const TensorDict& state, bool strict,
                            const std::string& file, bool skip_mismatched = false);

}  // namespace pipelab
