#pragma once
/// Ragged text: a language model's examples cut at document ends instead of from one stream
/// (datasets/text/lm_windows.h), batched in one of two ways (`dataset.collate`):
///  - pad: one document piece per row, a batch padded to its longest piece;
///  - pack: pieces laid one after the other into rows of `length` tokens, each into the row it
///    fills most tightly (best fit; a piece never straddles two rows), the rest padded.
/// Padding has input id 0, target kIgnoredTarget and document -1; each batch carries its
/// document layout (Batch::documents), which the models read (core/nn/document_layout.h):
/// positions restart at each piece and attention stays within it. A document longer than
/// length + 1 ids is cut into pieces of length + 1, neighbours sharing one id as windows do;
/// a piece of fewer than 2 ids predicts nothing and is dropped.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config/fields.h"
#include "core/data/dataset.h"

namespace pipelab {

enum class Collate { Windows, Pad, Pack };

/// The `collate` choice of a text dataset that can be ragged (imdb's task lm, synthetic's tokens).
template <class V>
void collate_field(V& v, Collate& collate) {
  v.choice("collate", collate, Choices<Collate>{{"windows", Collate::Windows}, {"pad", Collate::Pad}, {"pack", Collate::Pack}},
           "language modelling: windows = fixed windows of one stream of the documents; pad = one document per row, "
           "padded to the batch's longest; pack = documents one after the other in rows of length tokens, attention "
           "kept within each (both ragged: the model must read the document layout)");
}

/// The pieces of `documents` (each of 2 to length + 1 ids), in order.
std::vector<std::vector<int64_t>> document_pieces(const std::vector<std::vector<int64_t>>& documents, int64_t length);

/// One split of ragged text, padded or packed (`collate` Pad or Pack).
class RaggedText final : public Dataset {
 public:
  RaggedText(const std::vector<std::vector<int64_t>>& pieces, int64_t length, Collate collate);
  /// Pieces (pad) or rows (pack).
  int64_t size() const override;
  Batch get(const std::vector<int64_t>& indices, uint64_t seed) const override;
  bool has_documents() const override { return true; }
  /// "4210 document pieces of 1-128 tokens, 61.3 on average" / "... packed into 2100 rows of 128 tokens, 93.0% of them used".
  std::string description() const;
  /// Where each piece went: its row and the column of its first token.
  const std::vector<std::pair<int64_t, int64_t>>& placement() const { return placement_; }

 private:
  int64_t length_;
  Collate collate_;
  at::Tensor x_, y_, documents_;  ///< pad: [pieces, length] padded; pack: [rows, length]
  at::Tensor lengths_;            ///< pad: each piece's inputs
  int64_t pieces_ = 0, shortest_ = 0, longest_ = 0;
  std::vector<std::pair<int64_t, int64_t>> placement_;
};

}  // namespace pipelab
