/// `micro_naive`: naive model parallelism over micro-batches, a scheme written outside
/// pipelab. Each of the mini-batch's `chunks` micro-batches goes forward through every stage
/// and back before the next one starts; the stages accumulate the micro-batches' gradients
/// and step once at the end. One micro-batch is in flight: the memory of `naive` at 1/chunks
/// of its activations, and the numbers of `single` on the whole mini-batch (the loss of each
/// micro-batch is scaled by its share, docs/schemes.md §3.3).
#include "core/schedule/schedule.h"
#include "core/scheme/scheme.h"

namespace micro_naive {
namespace {

using namespace pipelab;

struct Options {
  int chunks = 4;
  template <class V>
  void fields(V& v) {
    v("chunks", chunks, "micro-batches per mini-batch", positive);
  }
};

class MicroNaive : public Configured<Scheme, Options> {
 public:
  using Configured::Configured;
  int micro_batches() const override { return options_.chunks; }
  /// Per stage, in order: F and B of micro-batch 0, of 1, ..., then U. Messages between the
  /// stages are added by pipelab (a schedule without SEND/RECV gets them).
  Schedule schedule(int stages, int units) const override {
    Schedule s(stages);
    for (int r = 0; r < stages; ++r) {
      for (int mb = 0; mb < units; ++mb) {
        s.add(r, Action::F(r, mb));
        s.add(r, Action::B(r, mb));
      }
      s.add(r, Action::U(r));
    }
    return s;
  }
  std::vector<int> max_in_flight(int stages) const override { return std::vector<int>(static_cast<size_t>(stages), 1); }
};

}  // namespace
}  // namespace micro_naive

PIPELAB_REGISTER(pipelab::Scheme, micro_naive::MicroNaive, "micro_naive",
                 "naive model parallelism one micro-batch at a time, gradients accumulated (a plugin)");
