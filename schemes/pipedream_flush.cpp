/// `pipedream_flush`: 1F1B order inside each mini-batch, one update at its end
/// (PipeDream-Flush, Narayanan et al. 2021; DAPPLE's early-backward schedule, Fan et al.
/// 2021). Same numbers as GPipe (every micro-batch sees the same weights and the gradients
/// add up to the mini-batch mean), but stage r holds at most D - r micro-batches' activations
/// instead of all of them. This file is the worked example of docs/adding-a-scheme.md.
#include "core/schedule/generators.h"
#include "core/scheme/scheme.h"

namespace pipelab {
namespace {

struct PipedreamFlushOptions {
  int chunks = 1;
  template <class V>
  void fields(V& v) {
    v("chunks", chunks, "micro-batches per mini-batch", positive);
  }
};

class PipedreamFlush : public Configured<Scheme, PipedreamFlushOptions> {
 public:
  using Configured::Configured;
  int micro_batches() const override { return options_.chunks; }

  /// 1F1B over the micro-batches, without its per-micro-batch updates, then one update.
  Schedule schedule(int stages, int units) const override { return schedules::one_f_one_b_flushed(stages, units); }

  std::vector<int> max_in_flight(int stages) const override {
    std::vector<int> bound;
    for (int r = 0; r < stages; ++r) bound.push_back(stages - r);
    return bound;
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, PipedreamFlush, "pipedream_flush",
                 "1F1B inside each mini-batch, one update at its end (PipeDream-Flush / DAPPLE)");

}  // namespace pipelab
