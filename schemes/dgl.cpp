/// `dgl`: synchronous decoupled greedy learning (Belilovsky, Eickenberg, Oyallon, "Decoupled
/// Greedy Learning of CNNs", ICML 2020; docs/schemes.md §3.20, F55). Each stage k has an
/// auxiliary net a_k and trains (theta_k, a_k) on its own loss CE(a_k(f_k(x_k)), y) with its
/// input detached; the last stage's auxiliary net is the model's classifier, so it trains on
/// the true loss. Nothing crosses a boundary backwards, so the stages never wait for each
/// other's backward and every pipelined timing gives the numbers of the reference code's
/// loop (eugenium/DGL, learning_curves/cifar_dgl.py): for each mini-batch, module by module,
/// forward, own step, pass the detached output on (computed with the pre-step weights).
///
/// The same rule as interlocking backprop's local mode (docs/schemes.md §3.20;
/// tests/schemes/dgl_test.cpp holds them equal). What is not here: the paper's
/// asynchronous DGL with a replay buffer per boundary (F56): a stage trains on entries of its
/// buffer, reused and skipped at its own pace, which pipelab's one-message-per-micro-batch
/// boundaries cannot express yet (docs/schemes.md §3.20 says what it needs).
#include "core/schedule/lower.h"
#include "core/scheme/scheme.h"
#include "schemes/greedy.h"

namespace pipelab {
namespace {

struct DglOptions {
  std::string heads = "auto";
  template <class V>
  void fields(V& v) {
    v("heads", heads,
      "auxiliary nets, e.g. conv128_bn_conv64_bn_gbpl_fc or fc256_fc (auto: by output shape; the grammar of "
      "interlocking's heads)",
      non_empty);
  }
  void check(const ConfigNode& node) const { greedy::check_heads(node, heads); }
};

class Dgl : public Configured<Scheme, DglOptions> {
 public:
  using Configured::Configured;
  /// One step per mini-batch and stage over an epoch: stage k runs mini-batch t + 1 while
  /// stage k + 1 trains on t.
  Span span() const override { return Span::Epoch; }
  bool routes_own_gradients() const override { return true; }
  Schedule schedule(int stages, int units) const override {
    Lowering how;
    how.sends_back = {};  // no gradient crosses a boundary
    return lower(greedy::greedy_steps(stages, units, false), how);
  }
  std::vector<int> max_in_flight(int stages) const override { return std::vector<int>(static_cast<size_t>(stages), 1); }
  bool prepares_stages() const override { return true; }
  void prepare_stage(Stage& stage, const std::vector<int64_t>& output_shape, const DataSpec& data) const override {
    greedy::attach_head(stage, options_.heads, output_shape, data,
                        "use a dataset with one label per example, or a scheme trained end to end",
                        [this](const std::string& k, const std::string& p, const std::string& f) { fail(k, p, f); });
  }
  std::unique_ptr<GradientRoute> make_route(Stage&) const override { return greedy::local_route(); }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Dgl, "dgl",
                 "decoupled greedy learning (synchronous): every stage trains on its own auxiliary loss, input detached");

}  // namespace pipelab
