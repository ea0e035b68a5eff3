#pragma once
/// Which document each token of a micro-batch belongs to, for a model that reads ragged text
/// (`collate: pad` or `pack`, datasets/text/ragged_text.h).
///
/// A padded row holds one document and padding; a packed row holds several documents one after
/// the other. The layout is one int64 tensor [N, T] per micro-batch: the document's number
/// within its row for each token, -1 for padding. It comes from the feed (Feed::documents),
/// like the targets, so every stage of every process reads it without its passing between
/// stages; the executor scopes each forward with it (DocumentScope) and the blocks whose
/// result depends on where a token sits read it here:
///  - positions restart at each document's first token (rotary angles, learned positions),
///    as Hugging Face's models do with position_ids for packed sequences;
///  - a query sees the keys of its own document only, earlier ones (causal). Padding forms a
///    document of its own, so every query sees at least itself and no softmax divides by 0.
/// A forward outside a scope (fixed-length windows, every other dataset) reads no layout.
#include <ATen/core/Tensor.h>

namespace pipelab::nn {

/// The layout of the forward the current thread computes; null outside a DocumentScope.
const at::Tensor* current_documents();

/// Makes `documents` ([N, T] int64, or undefined for none) current for the scope's lifetime.
class DocumentScope {
 public:
  explicit DocumentScope(const at::Tensor& documents);
  ~DocumentScope();
  DocumentScope(const DocumentScope&) = delete;
  DocumentScope& operator=(const DocumentScope&) = delete;

 private:
  const at::Tensor* previous_;
};

/// Positions within their documents of tokens [offset, offset + length) of every row
/// ([N, length] int64), from the current layout; undefined outside a scope.
at::Tensor document_positions(int64_t offset, int64_t length);

/// The keys that queries [offset, offset + length) may not see among the row's tokens
/// [0, offset + length) (an earlier segment's and their own): [N, 1, length, offset + length]
/// bool, true for a later token or another document's; undefined outside a scope.
at::Tensor blocked_keys(int64_t offset, int64_t length);

/// What a causal language model's queries [offset, offset + length) may not see: the later
/// tokens, and within a document scope (ragged text) the other documents' too, as
/// blocked_keys gives them; outside a scope [length, offset + length] bool on `options`'
/// device. The one mask llama's and the transformer's attention share.
at::Tensor causal_blocked_keys(int64_t offset, int64_t length, const at::TensorOptions& options);

}  // namespace pipelab::nn
