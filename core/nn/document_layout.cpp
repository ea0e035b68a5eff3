#include "core/nn/document_layout.h"

#include <ATen/ATen.h>
#include <fmt/ranges.h>  // formats a layout's sizes

#include "core/nn/forward_scope.h"
#include "core/util/error.h"

namespace pipelab::nn {
namespace {
const at::Tensor& layout(int64_t end) {
  const at::Tensor& d = *forward_scope().documents;
  PIPELAB_ASSERT(d.dim() == 2 && d.size(1) >= end, "a document layout of shape {} for tokens up to {}",
                 d.sizes(), end);
  return d;
}
}  // namespace

const at::Tensor* current_documents() { return forward_scope().documents; }

DocumentScope::DocumentScope(const at::Tensor& documents) : previous_(forward_scope().documents) {
  if (documents.defined()) forward_scope().documents = &documents;
}
DocumentScope::~DocumentScope() { forward_scope().documents = previous_; }

at::Tensor document_positions(int64_t offset, int64_t length) {
  if (!forward_scope().documents) return {};
  const at::Tensor d = layout(offset + length).narrow(1, 0, offset + length);
  // A document starts where the number changes; each token's position counts from the last
  // start at or before it (a running maximum of the starts' indices).
  const at::Tensor index = at::arange(d.size(1), d.options()).expand_as(d);
  at::Tensor starts = at::ones_like(d, d.options().dtype(at::kBool));
  if (d.size(1) > 1) starts.narrow(1, 1, d.size(1) - 1).copy_(d.narrow(1, 1, d.size(1) - 1) != d.narrow(1, 0, d.size(1) - 1));
  const at::Tensor first = std::get<0>(at::cummax(at::where(starts, index, at::zeros_like(index)), 1));
  return (index - first).narrow(1, offset, length);
}

at::Tensor blocked_keys(int64_t offset, int64_t length) {
  if (!forward_scope().documents) return {};
  const int64_t keys = offset + length;
  const at::Tensor& d = layout(keys);
  const at::Tensor queries = d.narrow(1, offset, length).unsqueeze(2), of_keys = d.narrow(1, 0, keys).unsqueeze(1);
  const at::Tensor later =
      at::ones({length, keys}, d.options().dtype(at::kBool)).triu(1 + offset);  // key j > query offset + i
  return (queries != of_keys).logical_or(later).unsqueeze(1);
}

at::Tensor causal_blocked_keys(int64_t offset, int64_t length, const at::TensorOptions& options) {
  const at::Tensor documents = blocked_keys(offset, length);
  if (documents.defined()) return documents;
  return at::ones({length, offset + length}, options.dtype(at::kBool)).triu(1 + offset);
}

}  // namespace pipelab::nn
