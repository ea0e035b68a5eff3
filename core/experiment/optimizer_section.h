#pragma once
/// The `optimizer:` section holds two things: the optimizer (a registered component with its
/// own options) and the gradient options every optimizer shares (core/optim/gradient_options.h:
/// clip, tied weights). Read here, for the experiment and for tools that read a file's
/// sections one by one (`pipelab schedule`).
#include <memory>

#include "core/config/config_node.h"
#include "core/optim/gradient_options.h"
#include "core/optim/optimizer.h"

namespace pipelab {

/// The gradient keys of `section` (an optimizer section); the optimizer's own keys are left
/// to it.
GradientOptions read_gradient_options(const ConfigNode& section);

/// The optimizer of `root`'s `optimizer` section, read without the gradient keys, which go
/// to `gradients`. A missing section is a ConfigError naming the registered optimizers.
std::unique_ptr<OptimizerFactory> read_optimizer_section(const ConfigNode& root, GradientOptions& gradients);

}  // namespace pipelab
