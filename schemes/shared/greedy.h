#pragma once
/// Training a stage by its own auxiliary objective (greedy, layer-wise learning): the head a
/// stage is given and the gradient route that trains the stage from it alone. Shared by
/// interlocking backprop's local mode (Gomez et al. 2022, docs/schemes.md, "interlocking backpropagation") and
/// synchronous decoupled greedy learning (Belilovsky et al. 2020, docs/schemes.md, "dgl"), which are the same
/// training rule (docs/schemes.md, "dgl").
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config/config_node.h"
#include "core/model/model.h"
#include "core/schedule/schedule.h"
#include "core/scheme/gradient_route.h"

namespace pipelab::greedy {

/// Reports a problem at a scheme option and throws (Component::fail).
using Fail = std::function<void(const std::string& key, const std::string& problem, const std::string& fix)>;

/// Checks a `heads` option (at `node`'s key `heads`) against the grammar of
/// schemes/shared/interlocking_heads.h; "auto" always passes.
void check_heads(const ConfigNode& node, const std::string& spec);

/// Gives every stage but the last the auxiliary head `spec` (the grammar of
/// schemes/shared/interlocking_heads.h; "auto": by the output's shape) with a cross-entropy loss,
/// before the stage's optimizer is made. A target per position or a spec that does not fit
/// the stage's output is reported through `fail` at key `heads`.
void attach_head(Stage& stage, const std::string& spec, const std::vector<int64_t>& output_shape, const DataSpec& data,
                 const std::string& refusal_fix, const Fail& fail);

/// One step per unit and stage, every stage on its own: F, then (`head_action`) H, then B and U,
/// compute-only (the caller lowers it with the messages its route sends back). No staleness:
/// the forward of unit t + 1 reads the weights after update t.
Schedule greedy_steps(int stages, int units, bool head_action);

/// The route that trains a stage by its own head's loss (the last stage: by the true loss)
/// and sends nothing back; it records each head's loss as `head_loss`.
std::unique_ptr<GradientRoute> local_route();

}  // namespace pipelab::greedy
