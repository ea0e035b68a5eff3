#include "core/scheme/sequence_split.h"

#include <algorithm>
#include <cmath>

#include "core/util/error.h"

namespace pipelab {

double SequenceSplit::work(int64_t first, int64_t end) const {
  // sum over t in [first, end) of w + t + 1.
  const auto upto = [this](int64_t e) { return token_work * double(e) + double(e) * double(e + 1) / 2; };
  return upto(end) - upto(first);
}

std::vector<int64_t> SequenceSplit::cuts(int64_t total) const {
  PIPELAB_ASSERT(segments >= 1 && total >= segments, "{} tokens cannot make {} segments", total, segments);
  std::vector<int64_t> out{0};
  const double whole = work(0, total), b = 2 * token_work + 1;
  for (int j = 1; j < segments; ++j) {
    int64_t cut = 0;
    if (mode == Segmentation::EqualTokens) {
      cut = total * j / segments;
    } else {
      // The e where w e + e (e + 1) / 2 = j / segments of the whole: e^2 + (2w + 1) e - 2 target = 0.
      const double target = whole * j / segments;
      cut = std::llround((-b + std::sqrt(b * b + 8 * target)) / 2);
    }
    // Every segment keeps at least one token.
    out.push_back(std::clamp<int64_t>(cut, out.back() + 1, total - (segments - j)));
  }
  out.push_back(total);
  return out;
}

}  // namespace pipelab
