/// `dgl`: decoupled greedy learning (Belilovsky, Eickenberg, Oyallon, "Decoupled Greedy
/// Learning of CNNs", ICML 2020; docs/schemes.md, "dgl"). Each stage k has an auxiliary net
/// a_k and trains (theta_k, a_k) on its own loss CE(a_k(f_k(x_k)), y) with its input
/// detached; the last stage's auxiliary net is the model's classifier, so it trains on the
/// true loss. Nothing crosses a boundary backwards.
///
/// Synchronous (docs/schemes.md, "dgl", `buffer: 0`, the default): the reference code's loop (eugenium/DGL,
/// learning_curves/cifar_dgl.py) — for each mini-batch, module by module, forward, own step,
/// pass the detached output on (computed with the pre-step weights). Every pipelined timing
/// gives its numbers. The same rule as interlocking backprop's local mode (tests/schemes/
/// dgl_test.cpp holds them equal).
///
/// Asynchronous with replay (docs/schemes.md, "dgl", `buffer: M`): schemes/dgl_replay.h — a seeded driver picks
/// modules, each training on an entry of a ring buffer of the previous module's outputs, so
/// an output may be read several times or never (Schedule::reads).
#include "core/schedule/lower.h"
#include "core/scheme/scheme.h"
#include "schemes/dgl_replay.h"
#include "schemes/shared/greedy.h"

namespace pipelab {
namespace {

struct DglOptions {
  std::string heads = "auto";
  dgl::ReplayRule replay;
  template <class V>
  void fields(V& v) {
    v("heads", heads,
      "auxiliary nets, e.g. conv128_bn_conv64_bn_gbpl_fc or fc256_fc (auto: by output shape; the grammar of "
      "interlocking's heads)",
      non_empty);
    v("buffer", replay.buffer,
      "0: synchronous; M > 0: asynchronous with replay, a ring buffer of M outputs per boundary (the "
      "reference's --buffer)",
      non_negative);
    v.choice("order", replay.order,
             Choices<dgl::Order>{
                 {"uniform", dgl::Order::Uniform}, {"round_robin", dgl::Order::RoundRobin}, {"list", dgl::Order::List}},
             "asynchronous: how the driver picks modules after its fill 0 0 1 1 ...: uniform (seeded), round_robin "
             "(the reference's --layer-sequence sequential), or list (`picks`, cyclically, no fill)");
    v("picks", replay.picks, "order: list: the modules in the order they are picked, repeated until the epoch ends");
    v("slow_stage", replay.slow_stage,
      "order: uniform: the module picked less often (the reference's --layer_noise; "
      "-1: none)");
    v("slowdown", replay.slowdown, "its pick weight is 1 - slowdown (the reference's --noise)", in_half_open(0.0, 1.0));
    v("max_reuse", replay.max_reuse,
      "reads of one buffer entry at most (0: unbounded; the reference's --max-buffer-reuse); a module with none "
      "left skips its pick",
      non_negative);
    v("seed", replay.seed, "seed of the uniform picks (the same sequence every epoch)", non_negative);
    v.choice("buffer_ranking", replay.ranking,
             Choices<dgl::Ranking>{{"lifo", dgl::Ranking::Lifo}, {"reference", dgl::Ranking::Reference}},
             "among the least-read entries: lifo (the freshest, default) or reference (the reference code's ranking, "
             "where a full ring's oldest slot counts as freshest; fidelity flag)");
    // Synchronous DGL (buffer 0) replays nothing: the replay's keys are refused there, and
    // left out of the options it records, so a run's config.yaml reads back.
    for (const char* key : {"order", "slow_stage", "slowdown", "max_reuse", "seed", "buffer_ranking"}) {
      v.unused_unless(key, replay.buffer > 0, "buffer > 0 (asynchronous DGL; buffer 0 is synchronous)");
    }
    v.unused_unless("picks", replay.buffer > 0 && replay.order == dgl::Order::List,
                    "buffer > 0 and order: list (picks is the list's order)");
  }
  void check(const ConfigNode& node) const {
    greedy::check_heads(node, heads);
    if (replay.order == dgl::Order::List && replay.picks.empty()) {
      node.fail("order: list needs the modules to pick", "add picks, e.g. picks: [0, 1]");
    }
    for (size_t i = 0; i < replay.picks.size(); ++i) {
      if (replay.picks[i] < 0)
        node.child("picks").fail(fmt::format("entry {} is {}", i, replay.picks[i]), "use module numbers 0, 1, ...");
    }
    if (replay.slow_stage < -1) node.child("slow_stage").fail("it is below -1", "use a module number, or -1 for none");
  }
};

class Dgl : public Configured<Scheme, DglOptions> {
 public:
  using Configured::Configured;
  /// One step per mini-batch and stage over an epoch: stage k runs mini-batch t + 1 while
  /// stage k + 1 trains on t.
  Span span() const override { return Span::Epoch; }
  /// Each stage learns from its own auxiliary loss: not end-to-end backpropagation.
  Numerics numerics() const override { return Numerics::Other; }
  Schedule schedule(int stages, int units) const override {
    if (options_.replay.buffer > 0) {
      return dgl::replay_schedule(options_.replay, stages, dgl::pick_sequence(options_.replay, stages, units));
    }
    Lowering how;
    how.sends_back = {};  // no gradient crosses a boundary
    return lower(greedy::greedy_steps(stages, units, false), how);
  }
  std::vector<int> max_in_flight(int stages) const override { return std::vector<int>(static_cast<size_t>(stages), 1); }
  /// Each stage's auxiliary net, trained by its own loss; nothing goes back.
  std::shared_ptr<const StageAddOns> add_ons() const override { return std::make_shared<const LocalHeads>(*this); }

 private:
  class LocalHeads : public StageAddOns {
   public:
    explicit LocalHeads(const Dgl& scheme) : scheme_(scheme) {}
    bool prepares() const override { return true; }
    void prepare(Stage& stage, const std::vector<int64_t>& output_shape, const DataSpec& data) const override {
      greedy::attach_head(stage, scheme_.options_.heads, output_shape, data,
                          "use a dataset with one label per example, or a scheme trained end to end",
                          [this](const std::string& k, const std::string& p, const std::string& f) {
                            scheme_.fail(k, p, f);
                          });
    }
    std::unique_ptr<GradientRoute> route(Stage&) const override { return greedy::local_route(); }
    bool routes_own_gradients() const override { return true; }

   private:
    const Dgl& scheme_;
  };
};

}  // namespace

PIPELAB_REGISTER(Scheme, Dgl, "dgl",
                 "decoupled greedy learning: every stage trains on its own auxiliary loss, input detached; "
                 "synchronous, or asynchronous with replay buffers (buffer: M)");

}  // namespace pipelab
