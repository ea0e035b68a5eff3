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

/// Copies `state` into the stages' parameters and buffers. Checks names and shapes:
/// a shape mismatch, an unknown name, or (when `strict`) a missing name is a UserError
/// naming `file` and the entries.
void load_model_state(const std::vector<Stage*>& stages, const TensorDict& state, bool strict,
                      const std::string& file);

}  // namespace pipelab
