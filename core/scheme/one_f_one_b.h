#pragma once
/// The common part of the asynchronous 1F1B schemes (vanilla async, PipeDream, SpecTrain,
/// PipeOptim): the 1F1B schedule over the mini-batches of an epoch, each a micro-batch
/// (docs/schemes.md, "1F1B"), with a flush at every epoch end as the reference code does
/// (`flush: epoch`) or one pipeline across epochs (`flush: never`).
#include "core/schedule/generators.h"
#include "core/scheme/scheme.h"

namespace pipelab {

/// The `flush` option every 1F1B scheme has.
struct FlushOption {
  enum class Flush { Epoch, Never };
  Flush flush = Flush::Epoch;
  template <class V>
  void fields(V& v) {
    v.choice("flush", flush, Choices<Flush>{{"epoch", Flush::Epoch}, {"never", Flush::Never}},
             "drain the pipeline at every epoch end (the reference code) or never");
  }
};

/// Where a paper and its released code disagree, a scheme offers both
/// (docs/schemes.md, "Quirks" lists each case; the published numbers come from the code).
enum class Variant { Paper, Reference };
inline const Choices<Variant>& variant_choices() {
  static const Choices<Variant> c{{"paper", Variant::Paper}, {"reference", Variant::Reference}};
  return c;
}

/// Warm-up forwards of stage r of D: w_r = D - 1 - r.
inline int warmup(int stage, int stages) { return stages - 1 - stage; }

/// Base of a 1F1B scheme whose options struct O has a member `FlushOption flush`.
template <class O>
class OneFOneBScheme : public Configured<Scheme, O> {
 public:
  using Configured<Scheme, O>::Configured;
  Span span() const override {
    return this->options_.flush.flush == FlushOption::Flush::Epoch ? Span::Epoch : Span::Run;
  }
  /// Each mini-batch's gradient meets weights that later mini-batches' updates have moved.
  Numerics numerics() const override { return Numerics::Asynchronous; }
  Schedule schedule(int stages, int units) const override { return schedules::one_f_one_b(stages, units); }
  /// At most D - r mini-batches in flight at stage r (docs/schemes.md, "1F1B").
  std::vector<int> max_in_flight(int stages) const override {
    std::vector<int> bound;
    for (int r = 0; r < stages; ++r) bound.push_back(stages - r);
    return bound;
  }
};

}  // namespace pipelab
