#include "datasets/text/ragged_text.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/util/error.h"

namespace pipelab {

std::vector<std::vector<int64_t>> document_pieces(const std::vector<std::vector<int64_t>>& documents, int64_t length) {
  PIPELAB_ASSERT(length >= 1, "pieces of {} tokens", length);
  std::vector<std::vector<int64_t>> pieces;
  for (const std::vector<int64_t>& d : documents) {
    const auto n = static_cast<int64_t>(d.size());
    // Piece i reads ids [i length, i length + length] (its last id is the next piece's first).
    for (int64_t first = 0; first + 1 < n; first += length) {
      const int64_t end = std::min(n, first + length + 1);
      pieces.emplace_back(d.begin() + first, d.begin() + end);
    }
  }
  return pieces;
}

RaggedText::RaggedText(const std::vector<std::vector<int64_t>>& pieces, int64_t length, Collate collate)
    : length_(length), collate_(collate), pieces_(static_cast<int64_t>(pieces.size())) {
  PIPELAB_ASSERT(collate != Collate::Windows, "ragged text is padded or packed");
  // Where each piece goes: (row, column) of its first input. Packing is best fit in the
  // pieces' order: each piece into the open row it fills most tightly, a new row where none
  // has room. Filling rows in turn instead leaves a quarter of them padded when pieces are up
  // to a row long (tools/bench/bench_ragged.py).
  std::multimap<int64_t, int64_t> room;  // space left -> row
  std::vector<int64_t> used;             // per row, its tokens
  shortest_ = pieces.empty() ? 0 : length;
  for (const std::vector<int64_t>& p : pieces) {
    const auto inputs = static_cast<int64_t>(p.size()) - 1;
    PIPELAB_ASSERT(inputs >= 1 && inputs <= length, "a piece of {} ids in rows of {}", p.size(), length);
    shortest_ = std::min(shortest_, inputs);
    longest_ = std::max(longest_, inputs);
    int64_t row = static_cast<int64_t>(used.size());
    const auto fits = collate == Collate::Pack ? room.lower_bound(inputs) : room.end();
    if (fits == room.end()) {
      used.push_back(0);
    } else {
      row = fits->second;
      room.erase(fits);
    }
    placement_.emplace_back(row, used[static_cast<size_t>(row)]);
    used[static_cast<size_t>(row)] += inputs;
    if (collate == Collate::Pack && used[static_cast<size_t>(row)] < length) {
      room.emplace(length - used[static_cast<size_t>(row)], row);
    }
  }
  const auto rows = static_cast<int64_t>(used.size());
  std::vector<int64_t> x(static_cast<size_t>(rows * length), 0), y(x.size(), kIgnoredTarget), d(x.size(), -1);
  std::vector<int64_t> documents(used.size(), 0);  // per row, the pieces placed so far
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto [row, first] = placement_[i];
    const int64_t document = documents[static_cast<size_t>(row)]++;
    for (size_t k = 0; k + 1 < pieces[i].size(); ++k) {
      const auto cell = static_cast<size_t>(row * length + first) + k;
      x[cell] = pieces[i][k];
      y[cell] = pieces[i][k + 1];
      d[cell] = document;
    }
  }
  x_ = at::tensor(x, at::kLong).view({rows, length});
  y_ = at::tensor(y, at::kLong).view({rows, length});
  documents_ = at::tensor(d, at::kLong).view({rows, length});
  lengths_ = at::tensor(used, at::kLong);
}

int64_t RaggedText::size() const { return x_.size(0); }

Batch RaggedText::get(const std::vector<int64_t>& indices, uint64_t /*seed*/) const {
  const at::Tensor idx = at::tensor(indices, at::kLong);
  // Padded to the batch's longest row (the feed cuts each micro-batch to its own longest).
  const int64_t width = indices.empty() ? 0 : lengths_.index_select(0, idx).max().item<int64_t>();
  const auto rows = [&](const at::Tensor& t) { return t.index_select(0, idx).narrow(1, 0, width).contiguous(); };
  return {rows(x_), rows(y_), at::Tensor(), rows(documents_)};
}

std::string RaggedText::description() const {
  const int64_t predicted = predicted_targets(y_);
  const std::string of = fmt::format("{} document pieces of {}-{} tokens, {:.1f} on average", pieces_, shortest_,
                                     longest_, pieces_ ? static_cast<double>(predicted) / static_cast<double>(pieces_) : 0.0);
  if (collate_ == Collate::Pad) return of + ", one per row, padded to the batch's longest";
  return fmt::format("{}, packed into {} rows of {} tokens, {:.1f}% of them used", of, size(), length_,
                     size() ? 100.0 * static_cast<double>(predicted) / static_cast<double>(size() * length_) : 0.0);
}

}  // namespace pipelab
