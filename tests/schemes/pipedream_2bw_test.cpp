// pipedream_2bw against docs/schemes.md, "pipedream_2bw" (the versions read, the one-step-delayed update)
// and its oracles in docs/schemes.md, "Numbered oracles" (version tags at D = 2, one scalar stage): golden schedules
// written by hand from the reference code, the weight version every F and B reads, one-step-delayed
// updates equal to a hand-written single-device loop in float64 at D = 1, 2 and 4, the flush:
// epoch restart, the LR of each update, and whole runs.
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <regex>

#include "core/schedule/lower.h"
#include "core/schedule/validate.h"
#include "core/weights/weights.h"
#include "tests/support/helpers.h"

namespace pipelab::pipedream_2bw_test {
namespace {

std::unique_ptr<Scheme> scheme(const std::string& yaml) {
  return Registry<Scheme>::get().create(ConfigNode(YAML::Load(yaml), std::make_shared<ConfigSource>("t"), "scheme"));
}

Schedule golden(const std::string& name) {
  return Schedule::parse(testing::read_text(std::string(PIPELAB_TEST_GOLDEN_DIR) + "/" + name), name);
}

TEST(Pipedream2bw, GoldenSchedules) {
  const auto s = scheme("{type: pipedream_2bw, micro_batches: 2}");
  EXPECT_EQ(s->schedule(2, 8), golden("pipedream_2bw_D2_m2_N8.txt"));
  EXPECT_EQ(s->schedule(4, 6), golden("pipedream_2bw_D4_m2_N6.txt"));
  for (const auto& [stages, units] : std::vector<std::pair<int, int>>{{2, 8}, {4, 6}, {4, 9}, {3, 5}, {4, 1}}) {
    const Schedule sched = s->schedule(stages, units);
    EXPECT_NO_THROW(validate_schedule(with_communication(sched), {s->max_in_flight(stages)})) << stages << " " << units;
    // One update per mini-batch, the last one possibly partial: ceil(units / m).
    for (int r = 0; r < stages; ++r) {
      const auto& a = sched.device(r);
      EXPECT_EQ(std::count(a.begin(), a.end(), Action::U(r)), (units + 1) / 2) << stages << " " << units;
    }
  }
  // The clamp w_r <= m bounds the activations: 3 in flight at stages 0 and 1 of 4 (1F1B: 4, 3).
  EXPECT_EQ(s->max_in_flight(4), (std::vector<int>{3, 3, 2, 1}));
  EXPECT_NE(testing::user_error([&] { validate_schedule(golden("one_f_one_b_D4_N6.txt"), {s->max_in_flight(4)}); }),
            "");
}

TEST(Pipedream2bw, OptionsFlushAndTheUnverifiedConstraint) {
  EXPECT_EQ(scheme("{type: pipedream_2bw}")->span(), Span::Run);  // the reference code never flushes
  EXPECT_EQ(scheme("{type: pipedream_2bw, flush: epoch}")->span(), Span::Epoch);
  const auto strict = scheme("{type: pipedream_2bw, micro_batches: 2, require_m_ge_d: true}");
  EXPECT_NO_THROW(strict->schedule(2, 4));
  try {
    strict->schedule(4, 4);
    ADD_FAILURE() << "4 stages with 2 micro-batches passed require_m_ge_d";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("set micro_batches >= 4"), std::string::npos) << e.what();
  }
}

// --- A float64 pipeline built by hand, run through the scheme's policies ---

/// y = w * x with one scalar weight (the oracles' stages).
struct ScalarImpl : torch::nn::Module {
  explicit ScalarImpl(double value) { w = register_parameter("w", at::full({1}, value, at::kDouble)); }
  at::Tensor forward(const at::Tensor& x) { return x * w; }
  at::Tensor w;
};
TORCH_MODULE(Scalar);

class HalfSquaredError : public Loss {
 public:
  at::Tensor compute(const at::Tensor& out, const at::Tensor& t) const override {
    return ((out - t).pow(2) / 2).mean();
  }
  at::Tensor correct(const at::Tensor&, const at::Tensor&) const override { return at::zeros({}, at::kLong); }
};

struct Pipe {
  std::unique_ptr<Scheme> scheme;
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<std::unique_ptr<StagePolicy>> policies;
  std::vector<StageSlot> slots;
};

/// Stages holding `blocks[r]`, the last with the half squared error, each with its optimizer
/// and the scheme's policy.
Pipe make_pipe(const std::string& scheme_yaml, const std::string& optimizer_yaml,
               std::vector<std::vector<Block>> blocks) {
  Pipe p;
  p.scheme = scheme(scheme_yaml);
  const auto optimizer = Registry<OptimizerFactory>::get().create(
      ConfigNode(YAML::Load(optimizer_yaml), std::make_shared<ConfigSource>("t"), "optimizer"));
  const int count = static_cast<int>(blocks.size());
  for (int r = 0; r < count; ++r) {
    StageSpec spec;
    spec.index = r;
    spec.count = count;
    spec.blocks = std::move(blocks[static_cast<size_t>(r)]);
    if (r + 1 == count) spec.loss = std::make_shared<HalfSquaredError>();
    p.stages.push_back(std::make_unique<Stage>(std::move(spec)));
    p.stages.back()->set_optimizer(optimizer->make(p.stages.back()->parameters()));
    p.policies.push_back(p.scheme->make_policy(*p.stages.back()));
    p.slots.push_back({p.stages.back().get(), p.policies.back().get()});
  }
  return p;
}

/// One scalar stage per initial value.
std::vector<std::vector<Block>> scalars(const std::vector<double>& init) {
  std::vector<std::vector<Block>> out;
  for (size_t r = 0; r < init.size(); ++r)
    out.push_back({{fmt::format("w{}", r), torch::nn::AnyModule(Scalar(init[r]))}});
  return out;
}

/// `stages` stages of Linear(3, 3) + tanh in float64, stage r drawn after manual_seed(r).
std::vector<std::vector<Block>> tanh_layers(int stages) {
  std::vector<std::vector<Block>> out;
  for (int r = 0; r < stages; ++r) {
    torch::manual_seed(static_cast<uint64_t>(r));
    torch::nn::Linear linear(3, 3);
    linear->to(at::kDouble);
    out.push_back({{fmt::format("linear{}", r), torch::nn::AnyModule(linear)},
                   {fmt::format("tanh{}", r), torch::nn::AnyModule(torch::nn::Tanh())}});
  }
  return out;
}

/// Micro-batch u's examples; `scale` is each micro-batch loss's factor.
class Data : public Feed {
 public:
  Data(std::function<at::Tensor(int)> x, std::function<at::Tensor(int)> t, int offset = 0, double scale = 1)
      : x_(std::move(x)), t_(std::move(t)), offset_(offset), scale_(scale) {}
  at::Tensor input(int mb) override { return x_(mb + offset_); }
  at::Tensor target(int mb) override { return t_(mb + offset_); }
  double loss_scale(int) override { return scale_; }
  void on_result(int, const MicroBatchResult&) override {}

 private:
  std::function<at::Tensor(int)> x_, t_;
  int offset_;
  double scale_;
};

/// Two examples of three features per micro-batch, different for every u.
at::Tensor vector_x(int u) { return at::sin(at::arange(6, at::kDouble).reshape({2, 3}) * (0.7 + 0.3 * u) + u); }
at::Tensor vector_t(int u) { return at::cos(at::arange(6, at::kDouble).reshape({2, 3}) * 0.5 - u); }

void run(Pipe& p, int units, Feed& feed) {
  auto executor = Registry<Executor>::get().create_default("sequential");
  executor->run(with_communication(p.scheme->schedule(static_cast<int>(p.stages.size()), units)), p.slots, feed,
                RunMode::Train);
}

std::vector<Weights> all_weights(const Pipe& p) {
  std::vector<Weights> out;
  for (const auto& s : p.stages) out.push_back(copy_weights(*s));
  return out;
}

double max_difference(const std::vector<Weights>& a, const std::vector<Weights>& b) {
  double worst = 0;
  for (size_t r = 0; r < a.size(); ++r) {
    for (size_t i = 0; i < a[r].size(); ++i) worst = std::max(worst, (a[r][i] - b[r][i]).abs().max().item<double>());
  }
  return worst;
}

/// The equivalent single-device loop on the same stages, written without the scheme: the mean
/// gradient of mini-batch k (micro-batches [k m, (k+1) m) of `units`) is taken at
/// W_{max(k-1,0)} and applied to W_k (`delayed`), or taken at W_k (plain training).
void reference_loop(Pipe& p, int units, int m, bool delayed) {
  std::vector<Weights> previous = all_weights(p);
  for (int first = 0; first < units; first += m) {
    const int count = std::min(m, units - first);
    const std::vector<Weights> current = all_weights(p);
    if (delayed) {
      for (size_t r = 0; r < p.stages.size(); ++r) write_weights(*p.stages[r], previous[r]);
    }
    for (int u = first; u < first + count; ++u) {
      at::Tensor h = vector_x(u);
      for (auto& s : p.stages) {
        ForwardOptions o;
        if (s->is_last()) o.target = vector_t(u);
        o.loss_scale = 1.0 / count;
        h = s->forward(u, h, o).activation();
      }
      at::Tensor g;
      for (auto it = p.stages.rbegin(); it != p.stages.rend(); ++it) g = (*it)->backward(u, g);
    }
    for (size_t r = 0; r < p.stages.size(); ++r) {
      write_weights(*p.stages[r], current[r]);
      p.stages[r]->step();
    }
    previous = current;
  }
}

// docs/schemes.md, "pipedream_2bw": every micro-batch of B_k reads W_{max(k-1,0)} on every stage, so at any
// depth 2BW is the single-device loop that applies the previous step's gradient (at D = 1
// too: it never equals plain training). 10 micro-batches, m = 3: the last mini-batch has one.
TEST(Pipedream2bw, EqualsTheOneStepDelayedSingleDeviceLoop) {
  for (const char* optimizer : {"{type: sgd, lr: 0.2, momentum: 0.9, weight_decay: 0.01}", "{type: adam, lr: 0.05}"}) {
    for (const int stages : {1, 2, 4}) {
      const std::string what = fmt::format("{} stages, {}", stages, optimizer);
      Pipe two_bw = make_pipe("{type: pipedream_2bw, micro_batches: 3}", optimizer, tanh_layers(stages));
      Data data(vector_x, vector_t);
      run(two_bw, 10, data);
      Pipe delayed = make_pipe("{type: naive}", optimizer, tanh_layers(stages));
      reference_loop(delayed, 10, 3, true);
      Pipe plain = make_pipe("{type: naive}", optimizer, tanh_layers(stages));
      reference_loop(plain, 10, 3, false);
      EXPECT_LT(max_difference(all_weights(two_bw), all_weights(delayed)), 1e-12) << what;
      EXPECT_GT(max_difference(all_weights(two_bw), all_weights(plain)), 1e-6) << what;
    }
  }
}

/// Wraps a policy (forwarding the hooks an F/B/U schedule uses) and writes down, per stage,
/// "F<k>.<i>@W<v>" for every forward and backward (mini-batch k, micro-batch i, the weight
/// version v it read, found by value among the stage's versions) and "|" for every update.
class Tracer : public StagePolicy {
 public:
  Tracer(StagePolicy& inner, int m) : inner_(inner), m_(m) {}
  void begin(Stage& s, int n) override {
    inner_.begin(s, n);
    if (versions_.empty()) versions_.push_back(value(s));
  }
  void before_forward(Stage& s, int mb, Message& in) override {
    inner_.before_forward(s, mb, in);
    note(s, 'F', mb);
  }
  void after_forward(Stage& s, int mb, Message& out) override { inner_.after_forward(s, mb, out); }
  void before_backward(Stage& s, int mb) override {
    inner_.before_backward(s, mb);
    note(s, 'B', mb);
  }
  void after_backward(Stage& s, int mb) override { inner_.after_backward(s, mb); }
  void update(Stage& s) override {
    inner_.update(s);
    versions_.push_back(value(s));
    events_.push_back({'|', -1, -1.0});
  }
  void end(Stage& s) override { inner_.end(s); }
  void collect(std::vector<StageMetric>& out) override { inner_.collect(out); }

  /// The trace; versions are resolved at the end, when all are known.
  std::string text() const {
    std::string out;
    for (const Event& e : events_) {
      if (!out.empty()) out += ' ';
      if (e.kind == '|') {
        out += '|';
        continue;
      }
      const auto it = std::find(versions_.begin(), versions_.end(), e.value);
      const std::string v = it == versions_.end() ? "W?" : fmt::format("W{}", it - versions_.begin());
      out += fmt::format("{}{}.{}@{}", e.kind, e.mb / m_, e.mb % m_, v);
    }
    return out;
  }
  const std::vector<double>& versions() const { return versions_; }

 private:
  struct Event {
    char kind;
    int mb;
    double value;
  };
  static double value(Stage& s) { return s.parameters().front().item<double>(); }
  void note(Stage& s, char kind, int mb) { events_.push_back({kind, mb, value(s)}); }

  StagePolicy& inner_;
  int m_;
  std::vector<double> versions_;  ///< the live weight after 0, 1, ... updates
  std::vector<Event> events_;
};

/// Scalar stages y = w_r x under `scheme_yaml`, traced; x = 1 + u / 4, targets cycle.
struct Traced {
  Traced(const std::string& scheme_yaml, const std::vector<double>& init, int m, int units) {
    pipe = make_pipe(scheme_yaml, "{type: sgd, lr: 0.1}", scalars(init));
    for (size_t r = 0; r < init.size(); ++r) {
      tracers.push_back(std::make_unique<Tracer>(*pipe.policies[r], m));
      pipe.slots[r].policy = tracers.back().get();
    }
    Data data(
        [](int u) {
          return at::full({1, 1}, 1 + u / 4.0, at::kDouble);
        },
        [](int u) {
          return at::full({1, 1}, std::vector<double>{0.5, -1, 0, 1}[static_cast<size_t>(u % 4)], at::kDouble);
        });
    run(pipe, units, data);
  }
  Pipe pipe;
  std::vector<std::unique_ptr<Tracer>> tracers;
};

/// The versions must be told apart by value for the trace to mean anything.
void expect_distinct(const std::vector<double>& versions) {
  for (size_t i = 0; i < versions.size(); ++i) {
    for (size_t j = i + 1; j < versions.size(); ++j) ASSERT_NE(versions[i], versions[j]) << i << " " << j;
  }
}

// Version tags for D = 2, m = 2 over iterations 0-2, as docs/schemes.md, "Numbered oracles"'s oracle states them
// (iteration 3, the cool-down, follows docs/schemes.md, "pipedream_2bw"'s versions). Read from the weights each action
// really saw.
TEST(Pipedream2bw, OracleO1VersionTagsAtTwoStages) {
  Traced t("{type: pipedream_2bw, micro_batches: 2}", {1.0, 0.5}, 2, 8);
  for (const auto& tr : t.tracers) expect_distinct(tr->versions());
  EXPECT_EQ(t.tracers[0]->text(),
            "F0.0@W0 F0.1@W0 B0.0@W0 F1.0@W0 B0.1@W0 | "
            "F1.1@W0 B1.0@W0 F2.0@W1 B1.1@W0 | "
            "F2.1@W1 B2.0@W1 F3.0@W2 B2.1@W1 | "
            "F3.1@W2 B3.0@W2 B3.1@W2 |");
  EXPECT_EQ(t.tracers[1]->text(),
            "F0.0@W0 B0.0@W0 F0.1@W0 B0.1@W0 | "
            "F1.0@W0 B1.0@W0 F1.1@W0 B1.1@W0 | "
            "F2.0@W1 B2.0@W1 F2.1@W1 B2.1@W1 | "
            "F3.0@W2 B3.0@W2 F3.1@W2 B3.1@W2 |");
}

// docs/schemes.md, "pipedream_2bw"'s versions at 4 stages (derived; docs/schemes.md, "Numbered oracles"'s version-tag
// oracle is for D = 2 only): every forward and backward of mini-batch k reads W_{max(k-1,0)} on every stage, with the
// warm-up clamped to m = 2. The staleness metrics say the same: gaps of 1 from the second mini-batch on,
// 2 versions held.
TEST(Pipedream2bw, EveryActionOfMiniBatchKReadsVersionKMinusOneAtFourStages) {
  const int m = 2, units = 10;
  Traced t("{type: pipedream_2bw, micro_batches: 2}", {1.0, 0.9, 1.1, 0.8}, m, units);
  for (size_t r = 0; r < 4; ++r) {
    expect_distinct(t.tracers[r]->versions());
    const std::string trace = t.tracers[r]->text();
    const std::regex tag(R"([FB](\d+)\.\d@W(\d+|\?))");
    int seen = 0;
    for (std::sregex_iterator it(trace.begin(), trace.end(), tag), e; it != e; ++it, ++seen) {
      const int k = std::stoi((*it)[1]);
      EXPECT_EQ((*it)[2].str(), std::to_string(std::max(k - 1, 0))) << "stage " << r << ": " << (*it)[0];
    }
    EXPECT_EQ(seen, 2 * units) << "stage " << r;
    std::vector<StageMetric> metrics;
    t.tracers[r]->collect(metrics);
    int gaps = 0, stored = 0;
    for (const StageMetric& row : metrics) {
      if (row.name == "forward_gap" || row.name == "backward_gap") {
        ++gaps;
        EXPECT_EQ(row.value, std::min<int64_t>(row.step, 1))
            << "stage " << r << " " << row.name << " at step " << row.step;
      } else if (row.name == "stored_versions") {
        ++stored;
        EXPECT_EQ(row.value, 2);
      }
    }
    EXPECT_EQ(gaps, 2 * units);
    EXPECT_EQ(stored, units / m);
  }
}

/// One scalar stage, loss (w - y_i)^2 / 2 with y = (0, 1) per mini-batch of m = 2 (docs/schemes.md
/// docs/schemes.md, "Numbered oracles"'s one-scalar-stage oracle).
std::vector<double> o2(const std::string& scheme_yaml, std::function<void(Pipe&, Tracer&)> train) {
  Pipe p = make_pipe(scheme_yaml, "{type: sgd, lr: 0.1}", scalars({1.0}));
  Tracer tracer(*p.policies[0], 2);
  p.slots[0].policy = &tracer;
  train(p, tracer);
  return tracer.versions();
}

Data o2_data(int offset = 0, double scale = 1) {
  return Data(
      [](int) {
        return at::ones({1, 1}, at::kDouble);
      },
      [](int u) {
        return at::full({1, 1}, static_cast<double>(u % 2), at::kDouble);
      },
      offset, scale);
}

void expect_weights(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-12) << what << " W" << k;
}

// The one-scalar-stage oracle (docs/schemes.md, "Numbered oracles"): W_k for k = 0..4. 2BW's second step
// already uses W_0's gradient (0.90, not Flush's 0.905).
TEST(Pipedream2bw, OracleO2OneScalarStage) {
  expect_weights(o2("{type: pipedream_2bw, micro_batches: 2}",
                    [](Pipe& p, Tracer&) {
                      Data d = o2_data();
                      run(p, 8, d);
                    }),
                 {1, 0.95, 0.90, 0.855, 0.815}, "2BW (F22)");
  // Flush / GPipe (docs/schemes.md, "pipedream_flush"): one run per mini-batch of two micro-batches, each loss
  // halved.
  expect_weights(o2("{type: pipedream_flush, chunks: 2}",
                    [](Pipe& p, Tracer&) {
                      for (int k = 0; k < 4; ++k) {
                        Data d = o2_data(2 * k, 0.5);
                        run(p, 2, d);
                      }
                    }),
                 {1, 0.95, 0.905, 0.8645, 0.82805}, "Flush (F23)");
}

// flush: epoch restarts with both buffers equal to the live weights (the reference
// code's restart), so the first update of each run is not stale; each update takes the LR of its
// mini-batch's first micro-batch, counted across runs (the runner's steps are micro-batches).
TEST(Pipedream2bw, EpochFlushRestartsAndTheLrFollowsTheMicroBatches) {
  Pipe p = make_pipe("{type: pipedream_2bw, micro_batches: 2, flush: epoch}", "{type: sgd, lr: 0.1}", scalars({1.0}));
  for (auto& s : p.stages) s->set_lr_schedule([](int64_t step) { return step < 4 ? 0.1 : 0.05; });
  Tracer tracer(*p.policies[0], 2);
  p.slots[0].policy = &tracer;
  for (int epoch = 0; epoch < 2; ++epoch) {
    Data d = o2_data();
    run(p, 4, d);
  }
  // W1 = 1 - 0.1 (1 - 0.5); W2 = W1 - 0.1 (W0 - 0.5); the restart: W3 = W2 - 0.05 (W2 - 0.5),
  // W4 = W3 - 0.05 (W2 - 0.5), at the LR of micro-batches 4 and 6.
  expect_weights(tracer.versions(), {1, 0.95, 0.90, 0.88, 0.86}, "flush: epoch");
  EXPECT_EQ(p.policies[0]->state().toInt(), 8);  // micro-batches before the next run, for a resume
  Pipe resumed =
      make_pipe("{type: pipedream_2bw, micro_batches: 2, flush: epoch}", "{type: sgd, lr: 0.1}", scalars({1.0}));
  resumed.policies[0]->load_state(*resumed.stages[0], p.policies[0]->state());
  EXPECT_EQ(resumed.policies[0]->state().toInt(), 8);
}

// Whole runs through the runner, both flush modes, with m = 4 not dividing the 6 micro-batches
// of an epoch: mini-batch 1 straddles the epochs, and flush: never saves each epoch's model
// after the update that applies its last micro-batch.
TEST(Pipedream2bw, RunsThroughTheRunner) {
  const char* yaml = R"(
model:     {type: mlp, sizes: [6, 8, 8, 3]}
dataset:   {type: synthetic, samples: 96, test_samples: 16, shape: [6], classes: 3}
partition: {stages: 2}
scheme:    {type: pipedream_2bw, micro_batches: 4}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, threads: 1, dtype: float64}
)";
  for (const char* flush : {"never", "epoch"}) {
    testing::TempDir dir;
    Experiment e = testing::experiment(yaml, dir.file("run"), {fmt::format("scheme.flush={}", flush)});
    RunnerOptions options;
    options.quiet = true;
    Runner runner(e, options);
    RunSummary summary;
    ASSERT_NO_THROW(summary = runner.run()) << flush;
    EXPECT_EQ(summary.status, "finished") << flush;
    ASSERT_EQ(summary.history.size(), 2u) << flush;
    for (const EpochMetrics& m : summary.history) EXPECT_TRUE(std::isfinite(m.test_loss)) << flush;
    ASSERT_EQ(summary.stage_means.size(), 2u) << flush;
    for (const auto& means : summary.stage_means) EXPECT_EQ(means.at("stored_versions"), 2) << flush;
  }
}

}  // namespace
}  // namespace pipelab::pipedream_2bw_test
