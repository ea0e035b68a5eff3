// xpipe (schemes/xpipe.cpp) against docs/schemes.md, "xpipe": the version difference held to its
// oracle in docs/schemes.md, "Numbered oracles" (and its flagged readings), the predictor through the scheme's own
// policy to its docs/schemes.md, "Numbered oracles" oracle in float64, the schedule (one update per mini-batch of T
// micro-batches), one stage equal to a hand-written Adam loop with gradient accumulation and prediction (and to
// `single` at T = 1), T = 1 equal to SpecTrain v1, a two-stage pipeline whose every forward and backward is
// checked against the predictor computed by hand from the stage's Adam state, with the staleness it
// records, and the Adam requirement.
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/schedule/lower.h"
#include "core/schedule/validate.h"
#include "core/weights/weights.h"
#include "schemes/xpipe.h"
#include "tests/support/helpers.h"

namespace pipelab::xpipe_test {
namespace {

using xpipe::HalfStage;
using xpipe::Rounding;

std::unique_ptr<Scheme> scheme(const std::string& yaml) {
  return Registry<Scheme>::get().create(ConfigNode(YAML::Load(yaml), std::make_shared<ConfigSource>("t"), "scheme"));
}

std::unique_ptr<OptimizerFactory> optimizer(const std::string& yaml) {
  return Registry<OptimizerFactory>::get().create(
      ConfigNode(YAML::Load(yaml), std::make_shared<ConfigSource>("t"), "optimizer"));
}

// --- The version difference (docs/schemes.md, "xpipe", its oracle in docs/schemes.md, "Numbered oracles") ---

std::vector<int> forward_s(int n, int t, HalfStage h = HalfStage::Ceil, Rounding ro = Rounding::HalfUp) {
  std::vector<int> out;
  for (int r = 0; r < n; ++r) out.push_back(xpipe::version_difference(r, n, t, h, ro).forward);
  return out;
}
std::vector<int> backward_s(int n, int t, HalfStage h = HalfStage::Ceil, Rounding ro = Rounding::HalfUp) {
  std::vector<int> out;
  for (int r = 0; r < n; ++r) out.push_back(xpipe::version_difference(r, n, t, h, ro).backward);
  return out;
}

TEST(Xpipe, VersionDifferenceMatchesO8) {
  EXPECT_EQ(forward_s(4, 1), (std::vector<int>{3, 2, 2, 1}));
  EXPECT_EQ(backward_s(4, 1), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(forward_s(4, 4), (std::vector<int>{2, 1, 1, 1}));
  EXPECT_EQ(backward_s(4, 4), (std::vector<int>{1, 1, 1, 1}));
  // T = 1 with ceil(r/2) is SpecTrain v1's s_f = floor(r/2) + D-1-r, s_b = floor(r/2), for every r.
  for (const int n : {1, 2, 3, 5, 8}) {
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(xpipe::version_difference(r, n, 1).forward, r / 2 + n - 1 - r) << n << " " << r;
      EXPECT_EQ(xpipe::version_difference(r, n, 1).backward, r / 2) << n << " " << r;
    }
  }
}

TEST(Xpipe, VersionDifferenceOtherReadings) {
  // The real r/2 at T = 1: r = 1 gives round(2.5) = 3 (up) or 2 (even); r = 3 gives round(1.5) = 2
  // under both roundings (SpecTrain: 1).
  EXPECT_EQ(forward_s(4, 1, HalfStage::Real), (std::vector<int>{3, 3, 2, 2}));
  EXPECT_EQ(forward_s(4, 1, HalfStage::Real, Rounding::HalfEven), (std::vector<int>{3, 2, 2, 2}));
  // Ties: N = 4, T = 4, r = 0: 6/4 = 1.5 -> 2 either way; N = 2, T = 2: s_fwd 2/2 and 1/2, s_bwd 1/2 and 1/2.
  EXPECT_EQ(forward_s(4, 4, HalfStage::Ceil, Rounding::HalfEven), (std::vector<int>{2, 1, 1, 1}));
  EXPECT_EQ(forward_s(2, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(backward_s(2, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(forward_s(2, 2, HalfStage::Ceil, Rounding::HalfEven), (std::vector<int>{1, 0}));
  EXPECT_EQ(backward_s(2, 2, HalfStage::Ceil, Rounding::HalfEven), (std::vector<int>{0, 0}));
  // D = 1: s = round((T-1)/T): 0 at T = 1; at T = 2 the tie 1/2 (1 up, 0 even); 1 from T = 3 on.
  EXPECT_EQ(xpipe::version_difference(0, 1, 1).forward, 0);
  EXPECT_EQ(xpipe::version_difference(0, 1, 2).forward, 1);
  EXPECT_EQ(xpipe::version_difference(0, 1, 2, HalfStage::Ceil, Rounding::HalfEven).forward, 0);
  EXPECT_EQ(xpipe::version_difference(0, 1, 2, HalfStage::Ceil, Rounding::HalfEven).backward, 0);
  EXPECT_EQ(xpipe::version_difference(0, 1, 3).forward, 1);
  EXPECT_EQ(xpipe::version_difference(0, 1, 3).backward, 1);
  // No tie: N = 4, T = 2, r = 1 with the real r/2 is 7/4 -> 2 under both roundings.
  EXPECT_EQ(xpipe::version_difference(1, 4, 2, HalfStage::Real).forward, 2);
  EXPECT_EQ(xpipe::version_difference(1, 4, 2, HalfStage::Real, Rounding::HalfEven).forward, 2);
  EXPECT_EQ(xpipe::round_quotient(5, 2, Rounding::HalfUp), 3);
  EXPECT_EQ(xpipe::round_quotient(5, 2, Rounding::HalfEven), 2);
  EXPECT_EQ(xpipe::round_quotient(7, 2, Rounding::HalfEven), 4);
}

// --- The predictor (docs/schemes.md, "xpipe", its oracle in docs/schemes.md, "Numbered oracles") through the policy
// ---

struct OneWeightImpl : torch::nn::Module {
  explicit OneWeightImpl(double value = 1) { w = register_parameter("w", at::full({1}, value, at::kDouble)); }
  at::Tensor forward(const at::Tensor& x) { return x * w; }
  at::Tensor w;
};
TORCH_MODULE(OneWeight);

class HalfSquaredError : public Loss {
 public:
  at::Tensor compute(const at::Tensor& out, const at::Tensor& t) const override {
    return ((out - t).pow(2) / 2).mean();
  }
  at::Tensor correct(const at::Tensor&, const at::Tensor&) const override { return at::zeros({}, at::kLong); }
};

/// Stage r of n holding one float64 weight, the last with the half squared error.
std::unique_ptr<Stage> one_weight_stage(int r, int n, const std::string& optimizer_yaml, double value = 1) {
  StageSpec spec;
  spec.index = r;
  spec.count = n;
  spec.blocks = {{fmt::format("w{}", r), torch::nn::AnyModule(OneWeight(value))}};
  if (r + 1 == n) spec.loss = std::make_shared<HalfSquaredError>();
  auto stage = std::make_unique<Stage>(std::move(spec));
  stage->set_optimizer(optimizer(optimizer_yaml)->make(stage->parameters()));
  return stage;
}

TEST(Xpipe, PredictorMatchesO9InFloat64) {
  // W = 1, m = 0.1, u = 0.01, t = 1, lr 1e-3, eps 1e-8: W_hat for s = 1, 2, 3.
  const std::map<int, double> o9{{0, 1.0}, {1, 0.999683772}, {2, 0.999367544}, {3, 0.999051317}};
  const auto s = scheme("{type: xpipe, micro_batches: 1}");
  for (int r = 0; r < 4; ++r) {
    auto stage = one_weight_stage(r, 4, "{type: adam, lr: 0.001}");
    stage->optimizer().load_state(
        {{"0.exp_avg", at::full({1}, 0.1, at::kDouble)}, {"0.exp_avg_sq", at::full({1}, 0.01, at::kDouble)}});
    stage->optimizer().set_steps(1);
    auto policy = s->make_policy(*stage);
    policy->begin(*stage, 1);
    const auto w = [&] { return stage->parameters()[0].item<double>(); };
    Message in;
    // The version-difference oracle (docs/schemes.md, "Numbered oracles") at T = 1: s_fwd = 3, 2, 2, 1 and
    // s_bwd = 0, 0, 1, 1.
    policy->before_forward(*stage, 0, in);
    EXPECT_NEAR(w(), o9.at(3 - (r + 1) / 2), 1e-9) << "forward, stage " << r;
    policy->after_forward(*stage, 0, in);
    EXPECT_EQ(w(), 1.0) << r;
    policy->before_backward(*stage, 0);
    EXPECT_NEAR(w(), o9.at(r / 2), 1e-9) << "backward, stage " << r;
    policy->after_backward(*stage, 0);
    EXPECT_EQ(w(), 1.0) << r;
  }
  // The same numbers from the predictor itself, the descent sign included.
  auto stage = one_weight_stage(0, 1, "{type: adam, lr: 0.001}");
  stage->optimizer().load_state(
      {{"0.exp_avg", at::full({1}, 0.1, at::kDouble)}, {"0.exp_avg_sq", at::full({1}, 0.01, at::kDouble)}});
  stage->optimizer().set_steps(1);
  for (const int k : {1, 2, 3}) EXPECT_NEAR(predict_weights(*stage, 1e-3, k, {})[0].item<double>(), o9.at(k), 1e-9);
}

// --- The schedule ---

TEST(Xpipe, OneFOneBWithOneUpdatePerMiniBatch) {
  const auto two = scheme("{type: xpipe, micro_batches: 2}");
  // Full warm-up (not 2BW's clamp to T): stage 0 of 4 starts with 3 forwards.
  const Schedule s = two->schedule(4, 8);
  EXPECT_EQ(std::vector<Action>(s.device(0).begin(), s.device(0).begin() + 6),
            (std::vector<Action>{Action::F(0, 0), Action::F(0, 1), Action::F(0, 2), Action::F(0, 3), Action::B(0, 0),
                                 Action::F(0, 4)}));
  EXPECT_EQ(two->schedule(2, 6).device(0),
            (std::vector<Action>{Action::F(0, 0), Action::F(0, 1), Action::B(0, 0), Action::F(0, 2), Action::B(0, 1),
                                 Action::U(0), Action::F(0, 3), Action::B(0, 2), Action::F(0, 4), Action::B(0, 3),
                                 Action::U(0), Action::F(0, 5), Action::B(0, 4), Action::B(0, 5), Action::U(0)}));
  for (const auto& [t, stages, units] :
       std::vector<std::tuple<int, int, int>>{{2, 2, 8}, {4, 4, 9}, {3, 4, 5}, {4, 4, 1}}) {
    const auto x = scheme(fmt::format("{{type: xpipe, micro_batches: {}}}", t));
    const Schedule sched = x->schedule(stages, units);
    EXPECT_NO_THROW(validate_schedule(with_communication(sched), {x->max_in_flight(stages)})) << t << " " << units;
    for (int r = 0; r < stages; ++r) {
      const auto& a = sched.device(r);
      EXPECT_EQ(std::count(a.begin(), a.end(), Action::U(r)), (units + t - 1) / t) << t << " " << units;
      EXPECT_EQ(a.back(), Action::U(r));
    }
  }
  // T = 1 is plain 1F1B, SpecTrain's schedule.
  EXPECT_EQ(scheme("{type: xpipe, micro_batches: 1}")->schedule(4, 7), scheme("{type: spectrain}")->schedule(4, 7));
  EXPECT_EQ(scheme("{type: xpipe}")->span(), Span::Epoch);
  EXPECT_EQ(scheme("{type: xpipe, flush: never}")->span(), Span::Run);
}

// --- Scalar pipelines run through the policies ---

struct Pipe {
  std::unique_ptr<Scheme> scheme;
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<std::unique_ptr<StagePolicy>> policies;
  std::vector<StageSlot> slots;
};

Pipe make_pipe(const std::string& scheme_yaml, const std::string& optimizer_yaml, const std::vector<double>& init) {
  Pipe p;
  p.scheme = scheme(scheme_yaml);
  const int n = static_cast<int>(init.size());
  for (int r = 0; r < n; ++r) {
    p.stages.push_back(one_weight_stage(r, n, optimizer_yaml, init[static_cast<size_t>(r)]));
    p.policies.push_back(p.scheme->make_policy(*p.stages.back()));
    p.slots.push_back({p.stages.back().get(), p.policies.back().get()});
  }
  return p;
}

double x_of(int u) { return 1 + u / 4.0; }
double y_of(int u) { return std::vector<double>{0.5, -1, 0, 1}[static_cast<size_t>(u % 4)]; }

/// Micro-batch u = mb + offset: one example x_u with target y_u.
class Data : public Feed {
 public:
  explicit Data(int offset) : offset_(offset) {}
  at::Tensor input(int mb) override { return at::full({1, 1}, x_of(mb + offset_), at::kDouble); }
  at::Tensor target(int mb) override { return at::full({1, 1}, y_of(mb + offset_), at::kDouble); }
  double loss_scale(int) override { return 1; }
  void on_result(int, const MicroBatchResult&) override {}

 private:
  int offset_;
};

/// One schedule run per entry of `runs` (units each), as the runner's epochs with flush: epoch.
void run(Pipe& p, const std::vector<int>& runs) {
  auto executor = Registry<Executor>::get().create_default("sequential");
  int offset = 0;
  for (const int units : runs) {
    Data data(offset);
    executor->run(with_communication(p.scheme->schedule(static_cast<int>(p.stages.size()), units)), p.slots, data,
                  RunMode::Train);
    offset += units;
  }
}

const double kLr0 = 0.05, kLr1 = 0.02, kB1 = 0.9, kB2 = 0.999, kEps = 1e-8;
double lr_of(int64_t unit) { return unit < 4 ? kLr0 : kLr1; }

/// The single-device loop of XPipe at D = 1, written from its predictor (docs/schemes.md, "xpipe") and
/// torch's Adam without the scheme: per run, mini-batches of t units (the last possibly fewer);
/// each mini-batch's mean gradient of (w x - y)^2 / 2 is taken at
/// W_hat = W - lr s m_hat / (sqrt(u_hat) + eps) (W itself before the first update), with lr the LR
/// of the update to come, then Adam steps W with the LR of the mini-batch's first unit.
double hand_loop(double w, int t, int s, const std::vector<int>& runs) {
  double m = 0, v = 0;
  int steps = 0, unit = 0;
  for (const int units : runs) {
    for (int first = 0; first < units; first += t) {
      const int count = std::min(t, units - first);
      const double lr = lr_of(unit);
      double w_hat = w;
      if (steps > 0 && s > 0) {
        const double d = (m / (1 - std::pow(kB1, steps))) / (std::sqrt(v / (1 - std::pow(kB2, steps))) + kEps);
        w_hat = w - lr * s * d;
      }
      double g = 0;
      for (int u = unit; u < unit + count; ++u) g += (w_hat * x_of(u) - y_of(u)) * x_of(u) / count;
      ++steps;
      m = kB1 * m + (1 - kB1) * g;
      v = kB2 * v + (1 - kB2) * g * g;
      w -= lr / (1 - std::pow(kB1, steps)) * m / (std::sqrt(v) / std::sqrt(1 - std::pow(kB2, steps)) + kEps);
      unit += count;
    }
  }
  return w;
}

// An equivalence at D = 1 (derived): s = round((T-1)/T) for both passes, so T = 3
// predicts one update ahead at every pass after the first update, and T = 2 with
// rounding: half_even predicts nothing (plain gradient accumulation). Two runs of 4 units
// (flush: epoch): mini-batches restart per run, the last of each is short at T = 3, and the
// LR schedule (by unit) drops at unit 4, in both the updates and the predictions.
TEST(Xpipe, OneStageEqualsAHandWrittenAdamLoop) {
  const std::vector<int> runs{4, 4};
  for (const auto& [yaml, t, s] :
       std::vector<std::tuple<std::string, int, int>>{{"{type: xpipe, micro_batches: 3}", 3, 1},
                                                      {"{type: xpipe, micro_batches: 2, rounding: half_even}", 2, 0},
                                                      {"{type: xpipe, micro_batches: 2}", 2, 1},
                                                      {"{type: xpipe, micro_batches: 1}", 1, 0}}) {
    Pipe p = make_pipe(yaml, fmt::format("{{type: adam, lr: {}}}", kLr0), {0.3});
    p.stages[0]->set_lr_schedule([](int64_t step) { return lr_of(step); });
    run(p, runs);
    const double got = p.stages[0]->parameters()[0].item<double>();
    EXPECT_NEAR(got, hand_loop(0.3, t, s, runs), 1e-12) << yaml;
    if (s > 0) {
      EXPECT_GT(std::abs(got - hand_loop(0.3, t, 0, runs)), 1e-4) << yaml << ": the prediction mattered";
    }
  }
}

/// Wraps a policy and checks, at every forward and backward, the weight the pass reads against the
/// predictor (docs/schemes.md, "xpipe") computed here from the stage's live weight and Adam state
/// (before the first update: the live weight, as docs/schemes.md, "Notation and optimizers" "Update directions" says).
class Probe : public StagePolicy {
 public:
  Probe(StagePolicy& inner, int s_fwd, int s_bwd) : inner_(inner), s_fwd_(s_fwd), s_bwd_(s_bwd) {}
  struct Pass {
    char kind;
    int mb;
    double live, read, f31;
  };
  void begin(Stage& st, int n) override { inner_.begin(st, n); }
  void before_forward(Stage& st, int mb, Message& in) override {
    const double live = value(st), f31 = expected(st, s_fwd_);
    inner_.before_forward(st, mb, in);
    passes.push_back({'F', mb, live, value(st), f31});
  }
  void after_forward(Stage& st, int mb, Message& out) override { inner_.after_forward(st, mb, out); }
  void before_backward(Stage& st, int mb) override {
    const double live = value(st), f31 = expected(st, s_bwd_);
    inner_.before_backward(st, mb);
    passes.push_back({'B', mb, live, value(st), f31});
  }
  void after_backward(Stage& st, int mb) override { inner_.after_backward(st, mb); }
  void update(Stage& st) override { inner_.update(st); }
  void end(Stage& st) override { inner_.end(st); }
  void collect(std::vector<StageMetric>& out) override { inner_.collect(out); }
  std::vector<Pass> passes;

 private:
  static double value(Stage& st) { return st.parameters()[0].item<double>(); }
  static double expected(Stage& st, int s) {
    const int64_t t = st.optimizer().steps();
    if (t == 0) return value(st);
    double m = 0, u = 0;
    for (const auto& [name, tensor] : st.optimizer().state()) (name == "0.exp_avg" ? m : u) = tensor.item<double>();
    const double d = (m / (1 - std::pow(kB1, t))) / (std::sqrt(u / (1 - std::pow(kB2, t))) + kEps);
    return value(st) - d * (kLr0 * s);
  }
  StagePolicy& inner_;
  int s_fwd_, s_bwd_;
};

/// The per-micro-batch forward and backward gaps of one stage, from its metrics.
std::pair<std::vector<double>, std::vector<double>> gaps(StagePolicy& policy) {
  std::vector<StageMetric> rows;
  policy.collect(rows);
  std::vector<double> forward, backward;
  for (const StageMetric& row : rows) {
    if (row.name == "forward_gap") forward.push_back(row.value);
    if (row.name == "backward_gap") backward.push_back(row.value);
  }
  return {forward, backward};
}

// D = 2, T = 2: the version difference (docs/schemes.md, "xpipe") gives s_fwd = s_bwd = 1 on both
// stages. Every pass after a stage's first update reads the predictor's W_hat (checked against the
// Adam state by hand), none before. Stage 0 (F0 F1 B0 F2 B1 U F3 B2 F4 B3 U ...) runs F2 before its
// first update and F3 after it: the forwards of a mini-batch straddle an update, so the forward gap
// alternates 0 (the bellwether, predicted from W_{k-1} to W_k, the version its mini-batch's update
// is applied to) and -1 (predicted from W_k, one version past it); with bellwether: reuse, F3 reads
// exactly what F2 read and the gap stays 0. The backward gap is -s_bwd = -1 throughout.
TEST(Xpipe, TwoStagesReadF31PredictionsAndRecordTheirGaps) {
  for (const bool reuse : {false, true}) {
    Pipe p = make_pipe(fmt::format("{{type: xpipe, micro_batches: 2{}}}", reuse ? ", bellwether: reuse" : ""),
                       fmt::format("{{type: adam, lr: {}}}", kLr0), {1.0, 0.5});
    std::vector<std::unique_ptr<Probe>> probes;
    for (size_t r = 0; r < 2; ++r) {
      probes.push_back(std::make_unique<Probe>(*p.policies[r], 1, 1));
      p.slots[r].policy = probes.back().get();
    }
    run(p, {8});
    for (size_t r = 0; r < 2; ++r) {
      int predicted = 0;
      for (const Probe::Pass& pass : probes[r]->passes) {
        const std::string what = fmt::format("reuse {} stage {} {}{}", reuse, r, pass.kind, pass.mb);
        if (reuse && r == 0 && pass.kind == 'F' && pass.mb % 2 == 1) continue;  // below
        EXPECT_NEAR(pass.read, pass.f31, 1e-15) << what;
        if (pass.read != pass.live) ++predicted;
      }
      // Stage 0 predicts from F3 and B2 on, stage 1 from F2 and B2 on (each: after its first update);
      // under reuse the odd forwards of stage 0 are not counted here.
      EXPECT_EQ(predicted, r == 0 ? (reuse ? 2 + 6 : 5 + 6) : 6 + 6) << "reuse " << reuse << " stage " << r;
    }
    const auto& f0 = probes[0]->passes;
    const auto read_at = [&](char kind, int mb) {
      return std::find_if(f0.begin(), f0.end(), [&](const Probe::Pass& x) { return x.kind == kind && x.mb == mb; })
          ->read;
    };
    if (reuse) {
      for (const int mb : {1, 3, 5, 7}) EXPECT_EQ(read_at('F', mb), read_at('F', mb - 1)) << mb;
      EXPECT_EQ(read_at('F', 3), 1.0);  // the bellwether F2 ran before any update: W_0
    } else {
      EXPECT_NE(read_at('F', 3), read_at('F', 2));
    }
    // Gaps = live version at the backward minus the version the pass's weights stand for.
    const auto [fwd0, bwd0] = gaps(*p.policies[0]);
    const auto [fwd1, bwd1] = gaps(*p.policies[1]);
    EXPECT_EQ(fwd0,
              reuse ? (std::vector<double>{0, 0, 1, 1, 0, 0, 0, 0}) : (std::vector<double>{0, 0, 1, -1, 0, -1, 0, -1}));
    EXPECT_EQ(bwd0, (std::vector<double>{0, 0, -1, -1, -1, -1, -1, -1}));
    EXPECT_EQ(fwd1, (std::vector<double>{0, 0, -1, -1, -1, -1, -1, -1}));
    EXPECT_EQ(bwd1, (std::vector<double>{0, 0, -1, -1, -1, -1, -1, -1}));
  }
}

// --- Whole runs ---

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 96, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 1]}
scheme:    {type: single}
optimizer: {type: adam, lr: 0.01}
run:       {epochs: 2, batch_size: 16, seed: 3}
)";

TEST(Xpipe, OneStageAtT1IsSingle) {
  const std::vector<std::string> one{"partition.stages=1", "partition.balance=[4]"};
  std::vector<std::string> x1 = one, x3 = one;
  x1.push_back("scheme={type: xpipe, micro_batches: 1}");
  x3.push_back("scheme={type: xpipe, micro_batches: 3}");
  const TensorDict single = testing::train(kMlp, one);
  EXPECT_TRUE(testing::identical(single, testing::train(kMlp, x1)));
  // T = 3: accumulation and s = 1 (checked against a hand-written loop above), not `single`.
  EXPECT_GT(testing::max_difference(single, testing::train(kMlp, x3)), 1e-6);
}

TEST(Xpipe, AtT1ItIsSpectrainV1WithAdam) {
  const TensorDict spectrain = testing::train(kMlp, {"scheme={type: spectrain, version: 1, variant: paper}"});
  EXPECT_TRUE(testing::identical(spectrain, testing::train(kMlp, {"scheme={type: xpipe, micro_batches: 1}"})));
  EXPECT_GT(testing::max_difference(spectrain, testing::train(kMlp, {"scheme={type: xpipe, micro_batches: 2}"})), 1e-6);
}

TEST(Xpipe, NeedsAnAdamFamilyOptimizer) {
  const std::string message = testing::user_error([] {
    testing::train(kMlp, {"optimizer={type: sgd, lr: 0.05, momentum: 0.9}", "scheme={type: xpipe}"});
  });
  EXPECT_NE(message.find("scheme xpipe"), std::string::npos) << message;
  EXPECT_NE(message.find("Fix: use optimizer adam or adamw"), std::string::npos) << message;
  EXPECT_NO_THROW(testing::train(kMlp, {"optimizer={type: sgd, lr: 0.05, momentum: 0.9}", "run.epochs=1",
                                        "scheme={type: xpipe, adam_only: false}"}));
}

TEST(Xpipe, RunsThroughTheRunnerAndReportsStaleness) {
  for (const char* flush : {"epoch", "never"}) {
    testing::TempDir dir;
    Experiment e = testing::experiment(kMlp, dir.file("run"),
                                       {fmt::format("scheme={{type: xpipe, micro_batches: 4, flush: {}}}", flush)});
    RunnerOptions options;
    options.quiet = true;
    Runner runner(e, options);
    RunSummary summary;
    ASSERT_NO_THROW(summary = runner.run()) << flush;
    EXPECT_EQ(summary.status, "finished") << flush;
    ASSERT_EQ(summary.history.size(), 2u) << flush;
    for (const EpochMetrics& m : summary.history) EXPECT_TRUE(std::isfinite(m.test_loss)) << flush;
    ASSERT_EQ(summary.stage_means.size(), 4u) << flush;
    for (const auto& means : summary.stage_means) {
      EXPECT_TRUE(means.count("forward_gap")) << flush;
      EXPECT_TRUE(means.count("backward_gap")) << flush;
    }
    EXPECT_TRUE(summary.stage_means[0].count("prediction_error")) << flush;
  }
}

}  // namespace
}  // namespace pipelab::xpipe_test
