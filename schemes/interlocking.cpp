/// `interlocking`: interlocking backpropagation (Gomez et al. 2022; docs/schemes.md, "Interlocking steps",
/// docs/schemes.md, "interlocking backpropagation" with its gradient routes; quirks in docs/schemes.md, "Quirks"). The
/// model is cut into K components; every component but the last has an auxiliary head a_k (its parameters are in the
/// component's optimizer). Each step, component k runs F, then (modes with heads) H: its own head loss L_k =
/// CE(a_k(h_k), y), which trains a_k and yields dL_k/dx_k to send back before anything is awaited; then B, the part
/// that needs the next component; then U. No staleness: every action of step t sees theta_k^t.
///
/// mode (what trains the main net theta_k, k <= K-2; the last component always uses the
/// true loss L_{K-1}; what travels from k+1 to k):
///   global        theta_k <- L_{K-1} (end-to-end backprop); heads unused     dL/dh_k
///   local         theta_k <- L_k through a_k                                 nothing
///   pairwise      theta_k <- L_{k+1} only (the released code's rule)         dL_{k+1}/dh_k
///   pairwise_sum  theta_k <- L_k + L_{k+1}   (in the repository's skipped     dL_{k+1}/dh_k
///   pairwise_mean theta_k <- (L_k + L_{k+1}) / 2   tests only; unverified, docs/schemes.md, "Quirks")
///   nwise         theta_k <- L_{min(k+d, K-1)} only (distance d; "3-wise" is  up to d gradients,
///                 d = 2); nwise with d = 1 is pairwise                       dL_{k+1..k+d}/dh_k
/// Heads: `heads` in the grammar of interlocking_heads.h (auto = the interlocking example's
/// conv128_bn_conv64_bn_gbpl_fc for images, fc for vectors). The auxiliary loss is
/// cross-entropy, as in the reference code (docs/schemes.md, "Quirks").
#include <torch/csrc/autograd/autograd.h>

#include "core/schedule/generators.h"
#include "core/schedule/lower.h"
#include "core/scheme/scheme.h"
#include "core/scheme/staleness.h"
#include "schemes/shared/greedy.h"
#include "schemes/shared/interlocking_heads.h"

namespace pipelab {
namespace {

enum class Mode { Global, Local, Pairwise, PairwiseSum, PairwiseMean, Nwise };

struct InterlockingOptions {
  Mode mode = Mode::Pairwise;
  int distance = 2;
  std::string heads = "auto";
  template <class V>
  void fields(V& v) {
    v.choice("mode", mode,
             Choices<Mode>{{"global", Mode::Global}, {"local", Mode::Local}, {"pairwise", Mode::Pairwise},
                           {"pairwise_sum", Mode::PairwiseSum}, {"pairwise_mean", Mode::PairwiseMean},
                           {"nwise", Mode::Nwise}},
             "which loss trains each component's main net (docs/schemes.md, \"interlocking backpropagation\")");
    v("distance", distance, "nwise: the loss d components further on trains a main net (3-wise: 2)", positive);
    v("heads", heads, "auxiliary heads, e.g. conv128_bn_conv64_bn_gbpl_fc or fc256_fc (auto: by output shape)", non_empty);
  }
  /// The distance the mode amounts to (pairwise variants are distance 1).
  int d() const { return mode == Mode::Nwise ? distance : 1; }
  void check(const ConfigNode& node) const { greedy::check_heads(node, heads); }
  bool uses_heads() const { return mode != Mode::Global; }
  bool sends_head_gradients() const { return mode != Mode::Global && mode != Mode::Local; }
};

/// grad += scale * g for each parameter (g may be undefined: the parameter was not used).
void accumulate(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads, double scale = 1.0) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!grads[i].defined()) continue;
    at::Tensor g = scale == 1.0 ? grads[i] : grads[i] * scale;
    at::Tensor& slot = const_cast<at::Tensor&>(params[i]).mutable_grad();
    slot = slot.defined() ? slot + g : g.clone();
  }
}

std::vector<at::Tensor> concat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// The gradient route of the modes with heads; the weights are always the latest.
class InterlockingRoute : public GradientRoute {
 public:
  explicit InterlockingRoute(const InterlockingOptions& o) : o_(o) {}

  /// H: the component's own objective, sent back before the next component is awaited.
  Message head(Stage& stage, int mb) override {
    const Stage::Forwarded f = stage.forwarded(mb);
    const bool send = !stage.is_first();
    if (stage.is_last()) {
      // The true loss trains the last main net; its input gradient goes back.
      const std::vector<at::Tensor> theta = stage.block_parameters();
      const auto grads = torch::autograd::grad({f.output}, send ? concat({f.input}, theta) : theta, {}, false, false, true);
      accumulate(theta, send ? std::vector<at::Tensor>(grads.begin() + 1, grads.end()) : grads);
      return send ? Message{{grads[0]}, {}, -1} : Message{};
    }
    const at::Tensor loss = stage.head_loss().compute(stage.head_forward(f.output), f.target);
    record_.add(stage, "head_loss", loss.item<double>());
    const std::vector<at::Tensor> phi = stage.head_parameters(), theta = stage.block_parameters();
    // pairwise_sum / pairwise_mean: L_k trains theta_k too (with 1/2 for the mean).
    const bool trains_theta = o_.mode == Mode::PairwiseSum || o_.mode == Mode::PairwiseMean;
    std::vector<at::Tensor> wrt = phi;
    if (trains_theta) wrt = concat(wrt, theta);
    if (send) wrt.push_back(f.input);
    const auto grads = torch::autograd::grad({loss}, wrt, {}, /*retain_graph=*/true, false, /*allow_unused=*/true);
    accumulate(phi, std::vector<at::Tensor>(grads.begin(), grads.begin() + static_cast<long>(phi.size())));
    if (trains_theta) {
      accumulate(theta, std::vector<at::Tensor>(grads.begin() + static_cast<long>(phi.size()),
                                                grads.begin() + static_cast<long>(phi.size() + theta.size())),
                 scale());
    }
    return send ? Message{{grads.back()}, {}, -1} : Message{};
  }

  Message backward(Stage& stage, int mb, const std::vector<Message>& in) override {
    const Stage::Forwarded f = stage.forwarded(mb);
    Message out;
    if (!stage.is_last()) out = train_from_next(stage, f, in);
    stage.release(mb);
    return out;
  }

  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }

 private:
  double scale() const { return o_.mode == Mode::PairwiseMean ? 0.5 : 1.0; }

  /// theta_k from the farthest loss the next component sent; relays the nearer ones.
  Message train_from_next(Stage& stage, const Stage::Forwarded& f, const std::vector<Message>& in) {
    // Gradients w.r.t. h_k for losses k+1, k+2, ... in order: the next component's head
    // (H message), then what it relayed (B message).
    std::vector<at::Tensor> losses{in.at(0).value()};
    if (in.size() > 1 && !in[1].empty()) {
      losses.push_back(in[1].value());
      losses.insert(losses.end(), in[1].extra.begin(), in[1].extra.end());
    }
    const std::vector<at::Tensor> theta = stage.block_parameters();
    const size_t relay = stage.is_first() ? 0 : std::min<size_t>(static_cast<size_t>(o_.d() - 1), losses.size());
    const auto grads = torch::autograd::grad({f.output}, theta, {losses.back()}, /*retain_graph=*/relay > 0, false, true);
    accumulate(theta, grads, scale());
    // Relay dL_{k+1..k+d-1}/dx_k so that the previous component gets its d losses (docs/schemes.md, "Quirks":
    // each is one more vector-Jacobian product through f_k).
    Message out;
    for (size_t i = 0; i < relay; ++i) {
      const at::Tensor dx = torch::autograd::grad({f.output}, {f.input}, {losses[i]}, /*retain_graph=*/i + 1 < relay)[0];
      if (i == 0) {
        out.values = {dx};
      } else {
        out.extra.push_back(dx);
      }
    }
    return out;
  }

  InterlockingOptions o_;
  StalenessRecorder record_;
};

class Interlocking : public Configured<Scheme, InterlockingOptions> {
 public:
  using Configured::Configured;
  /// One step per mini-batch and component: F, H (modes with heads), B, U, over an epoch,
  /// so components overlap across steps where the routes allow it.
  Span span() const override { return Span::Epoch; }
  /// Stages learn from auxiliary heads' local losses: not end-to-end backpropagation.
  Numerics numerics() const override { return Numerics::Other; }
  /// What goes back is the mode's gradient route, written into the schedule as its SEND and
  /// RECV actions: stage r's B of t takes stage r+1's messages in the order listed.
  Schedule schedule(int stages, int units) const override {
    const Schedule s = greedy::greedy_steps(stages, units, options_.sends_head_gradients());
    Lowering how;
    switch (options_.mode) {
      case Mode::Global: how.sends_back = {ActionKind::Backward}; break;  // end-to-end backprop
      case Mode::Local: how.sends_back = {}; break;                       // nothing comes back
      case Mode::Nwise:
        // Stage r+1's head gradient, then its relay of the further heads' gradients.
        how.sends_back = options_.distance > 1 ? std::vector<ActionKind>{ActionKind::Head, ActionKind::Backward}
                                               : std::vector<ActionKind>{ActionKind::Head};
        break;
      default: how.sends_back = {ActionKind::Head}; break;  // pairwise: the next head's gradient
    }
    return lower(s, how);
  }
  std::vector<int> max_in_flight(int stages) const override { return std::vector<int>(static_cast<size_t>(stages), 1); }
  ValidateOptions schedule_rules(int stages) const override {
    ValidateOptions o = Scheme::schedule_rules(stages);
    o.kinds.push_back(ActionKind::Head);
    return o;
  }
  /// Each component's auxiliary head and the mode's gradient route.
  std::shared_ptr<const StageAddOns> add_ons() const override { return std::make_shared<const HeadsAndRoutes>(*this); }

 private:
  class HeadsAndRoutes : public StageAddOns {
   public:
    explicit HeadsAndRoutes(const Interlocking& scheme) : scheme_(scheme), options_(scheme.options_) {}
    bool prepares() const override { return options_.uses_heads(); }
    void prepare(Stage& stage, const std::vector<int64_t>& output_shape, const DataSpec& data) const override {
      if (!options_.uses_heads()) return;
      greedy::attach_head(stage, options_.heads, output_shape, data,
                          "use mode: global, or a dataset with one label per example",
                          [this](const std::string& k, const std::string& p, const std::string& f) {
                            scheme_.fail(k, p, f);
                          });
    }
    std::unique_ptr<GradientRoute> route(Stage&) const override {
      if (options_.mode == Mode::Global) return nullptr;  // end-to-end backprop
      // Trained by its own head (or, last, by the true loss); nothing goes back.
      if (options_.mode == Mode::Local) return greedy::local_route();
      return std::make_unique<InterlockingRoute>(options_);
    }
    /// Heads and routes call autograd themselves (InterlockingRoute::backward/head).
    bool routes_own_gradients() const override { return true; }

   private:
    const Interlocking& scheme_;
    const InterlockingOptions& options_;
  };
};

}  // namespace

PIPELAB_REGISTER(Scheme, Interlocking, "interlocking",
                 "interlocking backprop: global, local, pairwise(_sum|_mean) or n-wise training through auxiliary heads");

}  // namespace pipelab
