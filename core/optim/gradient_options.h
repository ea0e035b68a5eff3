#pragma once
/// What happens to the gradients between the last backward and the update, beyond the
/// optimizer: a gradient-norm clip and the treatment of tied weights (docs/schemes.md
/// docs/schemes.md, "Notation and optimizers"). Written in the `optimizer:` section next to the optimizer's own keys
/// (`optimizer: {type: sgd, lr: 0.1, clip_grad_norm: 1.0}`), read in one place
/// (core/experiment/experiment.cpp) and run by the ALLREDUCE before each update
/// (core/comm/gradient_finish.h).
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "core/config/fields.h"

namespace pipelab {

struct GradientOptions {
  enum class ClipScope { Auto, Global, PerStage, PerTensor };
  enum class Tied { Sum, Separate };
  std::optional<double> clip_grad_norm;
  std::string clip_norm_type = "2";
  ClipScope clip_scope = ClipScope::Auto;
  Tied tied_gradients = Tied::Sum;
  /// Whether the file gave tied_gradients: a model without tied weights refuses it
  /// (core/assembly/run_builder.cpp), since it would do nothing.
  bool tied_gradients_given = false;

  /// The keys this struct reads (the optimizer's own options do not know them).
  static std::set<std::string> keys() {
    return {"clip_grad_norm", "clip_norm_type", "clip_scope", "tied_gradients"};
  }
  template <class V>
  void fields(V& v) {
    v("clip_grad_norm", clip_grad_norm,
      "clip the gradients to this total norm before each update, as torch.nn.utils.clip_grad_norm_ over the "
      "whole model (off when absent)");
    v("clip_norm_type", clip_norm_type, "p of the clip's norm: a number > 0, or inf (the largest magnitude)");
    v.choice("clip_scope", clip_scope,
             Choices<ClipScope>{{"auto", ClipScope::Auto}, {"global", ClipScope::Global},
                                {"per_stage", ClipScope::PerStage}, {"per_tensor", ClipScope::PerTensor}},
             "global: one norm over every stage's k-th update (the default for schemes that flush every "
             "mini-batch); per_stage: each stage's own norm (the default for asynchronous schemes; AsyncPP's "
             "clipping); per_tensor: each parameter tensor's own norm (BertAdam's, as Chimera's reference code clips)");
    v.choice("tied_gradients", tied_gradients, Choices<Tied>{{"sum", Tied::Sum}, {"separate", Tied::Separate}},
             "tied weights (model.tie_embeddings): sum: both copies step with the sum of their gradients, as one "
             "shared parameter (Megatron-LM); separate: each copy steps with its own (PipeDream-2BW's reference code)");
    v.unused_unless("clip_norm_type", clip_grad_norm.has_value(), "clip_grad_norm is set");
    v.unused_unless("clip_scope", clip_grad_norm.has_value(), "clip_grad_norm is set");
  }
  void check(const ConfigNode& node) const {
    if (clip_grad_norm && !(*clip_grad_norm > 0)) {
      node.child("clip_grad_norm").fail(fmt::format("the largest norm must be positive, got {}", *clip_grad_norm),
                                        "set a positive norm (e.g. 1.0), or remove clip_grad_norm");
    }
    if (!parse_norm_type(clip_norm_type)) {
      node.child("clip_norm_type").fail(fmt::format("'{}' is not a norm: a number > 0, or inf", clip_norm_type),
                                        "write e.g. clip_norm_type: 2 or clip_norm_type: inf");
    }
  }
  /// p of the norm (infinity for "inf").
  double norm_type() const { return *parse_norm_type(clip_norm_type); }

 private:
  static std::optional<double> parse_norm_type(const std::string& text) {
    if (text == "inf" || text == ".inf") return std::numeric_limits<double>::infinity();
    try {
      size_t used = 0;
      const double p = std::stod(text, &used);
      if (used == text.size() && std::isfinite(p) && p > 0) return p;
    } catch (const std::exception&) {
    }
    return std::nullopt;
  }
};

}  // namespace pipelab
