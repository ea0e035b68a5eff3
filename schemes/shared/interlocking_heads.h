#pragma once
/// Auxiliary heads of interlocking backprop, from a small grammar (the interlocking
/// repository's naming, docs/schemes.md, "Interlocking ResNet example"): tokens joined by '_', e.g.
///   conv128_bn_conv64_bn_gbpl_fc   (image outputs)       fc256_fc   (vector outputs)
///   conv<C>  3x3 convolution to C channels + ReLU (padding 1)
///   bn       batch norm before the preceding conv's ReLU
///   gbpl     global average pooling + flatten
///   fc<H>    linear to H + ReLU;   fc   linear to the classes (the last token)
#include <torch/nn/modules/container/any.h>

#include <string>
#include <vector>

#include "core/util/error.h"

namespace pipelab::interlocking {

/// A head spec outside the grammar, or one that does not fit a stage's output; the
/// scheme reports it at `scheme.heads` with the file and line.
class HeadSpecError : public UserError {
 public:
  HeadSpecError(std::string problem, std::string fix)
      : UserError(problem + ". Fix: " + fix), problem(std::move(problem)), fix(std::move(fix)) {}
  std::string problem, fix;
};

/// Checks `spec` against the grammar (HeadSpecError if it is not in it).
void check_head_grammar(const std::string& spec);

/// Builds a head for outputs of shape `input_shape` ([C, H, W] or [F]) and `classes`.
/// A bad token or a token that does not fit the shape throws HeadSpecError naming the
/// token, the valid ones and the fix.
torch::nn::AnyModule build_head(const std::string& spec, const std::vector<int64_t>& input_shape, int64_t classes);

/// The head spec used when the scheme says `heads: auto`: the interlocking example's
/// conv128_bn_conv64_bn_gbpl_fc for images, fc for vectors.
std::string default_head(const std::vector<int64_t>& input_shape);

}  // namespace pipelab::interlocking
