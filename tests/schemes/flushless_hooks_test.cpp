// flush: never wraps each stage's policy (EpochSnapshot, core/train/runner_flushless.h). A
// hook the wrapper does not forward falls back to StagePolicy's default without an error, so
// a scheme's own gradient route, head or state would silently be lost. These
// tests hold the wrapper to the whole interface: every hook declared in core/scheme/scheme.h
// is overridden, each reaches the scheme's policy with its arguments and results, and a run
// with flush: never goes through a scheme's own B, I, W and H. (ALLREDUCE is the
// replicas' all-reduce, core/scheme/replicas.h, not a hook.)
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "core/schedule/generators.h"
#include "core/schedule/lower.h"
#include "core/train/runner_flushless.h"
#include "tests/support/helpers.h"

namespace pipelab {
namespace {

/// Every hook of StagePolicy; the direct test below calls each of them.
const std::set<std::string> kHooks{"begin",
                                   "checkpoint",
                                   "before_forward",
                                   "after_forward",
                                   "before_backward",
                                   "backward",
                                   "backward_input",
                                   "backward_weight",
                                   "after_backward",
                                   "head",
                                   "update",
                                   "end",
                                   "collect",
                                   "state",
                                   "load_state"};

/// The text of `class <name>` ... `};` in `file`.
std::string class_body(const std::string& file, const std::string& name) {
  const std::string text = testing::read_text(std::string(PIPELAB_SOURCE_DIR) + "/" + file);
  const size_t start = text.find("class " + name);
  EXPECT_NE(start, std::string::npos) << name << " not in " << file;
  const size_t end = text.find("\n};", start);
  return text.substr(start, end - start);
}

TEST(FlushlessHooks, TheWrapperOverridesEveryHookOfStagePolicy) {
  std::set<std::string> declared, overridden;
  const std::string policy = class_body("core/scheme/scheme.h", "StagePolicy {");
  const std::regex virtual_fn(R"(virtual\s+[^;(]*?(~?\w+)\s*\()");
  for (std::sregex_iterator it(policy.begin(), policy.end(), virtual_fn), e; it != e; ++it) {
    if ((*it)[1].str()[0] != '~') declared.insert((*it)[1]);
  }
  const std::string wrapper = class_body("core/train/runner_flushless.h", "EpochSnapshot final");
  const std::regex override_fn(R"((\w+)\([^()]*\)\s*(const\s*)?override)");
  for (std::sregex_iterator it(wrapper.begin(), wrapper.end(), override_fn), e; it != e; ++it)
    overridden.insert((*it)[1]);
  EXPECT_EQ(declared, kHooks) << "StagePolicy's hooks changed: update kHooks and the direct test below";
  EXPECT_EQ(overridden, declared)
      << "EpochSnapshot (core/train/runner_flushless.h) must forward every StagePolicy hook";
  // run.shadow's wrapper (core/train/shadow_sync.h) has the same duty.
  std::set<std::string> shadow;
  const std::string shadow_wrapper = class_body("core/train/shadow_sync.h", "ShadowPolicy final");
  for (std::sregex_iterator it(shadow_wrapper.begin(), shadow_wrapper.end(), override_fn), e; it != e; ++it)
    shadow.insert((*it)[1]);
  EXPECT_EQ(shadow, declared) << "ShadowPolicy (core/train/shadow_sync.h) must forward every StagePolicy hook";
}

/// Records each hook it sees and answers with values the test can recognise.
class Recorder : public StagePolicy {
 public:
  mutable std::vector<std::string> calls;  // const hooks record too
  std::string loaded;
  void begin(Stage&, int) override { calls.push_back("begin"); }
  bool checkpoint(int) const override {
    calls.push_back("checkpoint");
    return true;
  }
  void before_forward(Stage&, int, Message& in) override {
    calls.push_back("before_forward");
    in.tag = 21;
  }
  void after_forward(Stage&, int, Message& out) override {
    calls.push_back("after_forward");
    out.tag = 22;
  }
  void before_backward(Stage&, int) override { calls.push_back("before_backward"); }
  Message backward(Stage&, int, const std::vector<Message>& in) override {
    calls.push_back("backward");
    return {{}, {}, 11 + static_cast<int64_t>(in.size())};
  }
  Message backward_input(Stage&, int, const std::vector<Message>&) override {
    calls.push_back("backward_input");
    return {{}, {}, 12};
  }
  void backward_weight(Stage&, int) override { calls.push_back("backward_weight"); }
  void after_backward(Stage&, int) override { calls.push_back("after_backward"); }
  Message head(Stage&, int) override {
    calls.push_back("head");
    return {{}, {}, 14};
  }
  void update(Stage&) override { calls.push_back("update"); }
  void end(Stage&) override { calls.push_back("end"); }
  void collect(std::vector<StageMetric>& out) override {
    calls.push_back("collect");
    out.push_back({7, "probe", 1.5});
  }
  c10::IValue state() const override {
    calls.push_back("state");
    return c10::IValue(std::string("probe state"));
  }
  void load_state(Stage&, const c10::IValue& s) override {
    calls.push_back("load_state");
    loaded = s.toStringRef();
  }
};

TEST(FlushlessHooks, EveryHookReachesTheSchemesPolicy) {
  testing::TempDir dir;
  StageSpec spec;
  spec.blocks.push_back({"linear", torch::nn::AnyModule(torch::nn::Linear(2, 2))});
  spec.loss = std::make_shared<CrossEntropyLoss>();
  Stage stage(std::move(spec));
  Recorder inner;
  EpochSnapshot wrapper(inner, dir.path(), 1);  // one micro-batch per epoch
  StagePolicy& p = wrapper;
  Message m;
  p.begin(stage, 1);
  EXPECT_TRUE(p.checkpoint(0));
  p.before_forward(stage, 0, m);
  EXPECT_EQ(m.tag, 21);
  p.after_forward(stage, 0, m);
  EXPECT_EQ(m.tag, 22);
  p.before_backward(stage, 0);
  EXPECT_EQ(p.backward(stage, 0, {Message{}, Message{}}).tag, 13);  // 11 + the two messages it was given
  EXPECT_EQ(p.backward_input(stage, 0, {}).tag, 12);
  p.backward_weight(stage, 0);
  p.after_backward(stage, 0);
  EXPECT_EQ(p.head(stage, 0).tag, 14);
  p.update(stage);
  p.end(stage);
  std::vector<StageMetric> metrics;
  p.collect(metrics);
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0].name, "probe");
  EXPECT_EQ(p.state().toStringRef(), "probe state");
  p.load_state(stage, c10::IValue(std::string("restored")));
  EXPECT_EQ(inner.loaded, "restored");
  EXPECT_EQ(std::set<std::string>(inner.calls.begin(), inner.calls.end()), kHooks);
  EXPECT_EQ(inner.calls.size(), kHooks.size()) << "a hook ran twice or not at all";
  // Micro-batch 0 ends epoch 1 (one micro-batch per epoch): its update saved the weights.
  EXPECT_TRUE(std::filesystem::exists(EpochSnapshot::path(dir.path(), 1, 0)));
}

/// Per stage, how often the scheme's own routes ran.
using Counts = std::vector<std::map<std::string, int>>;

/// A policy with its own B, I, W and H (end-to-end gradients, counted).
class CountingPolicy : public StagePolicy {
 public:
  explicit CountingPolicy(std::map<std::string, int>& counts) : counts_(counts) {}
  Message backward(Stage& s, int mb, const std::vector<Message>& in) override {
    ++counts_["backward"];
    return StagePolicy::backward(s, mb, in);
  }
  Message backward_input(Stage& s, int mb, const std::vector<Message>& in) override {
    ++counts_["backward_input"];
    return StagePolicy::backward_input(s, mb, in);
  }
  void backward_weight(Stage& s, int mb) override {
    ++counts_["backward_weight"];
    StagePolicy::backward_weight(s, mb);
  }
  Message head(Stage&, int) override {
    ++counts_["head"];
    return {};
  }

 private:
  std::map<std::string, int>& counts_;
};

/// Never flushed; 1F1B with the odd micro-batches' backward split into I and W, an H after
/// every F.
class CountingScheme : public Scheme {
 public:
  explicit CountingScheme(Counts& counts) : counts_(counts) { set_type("counting"); }
  YAML::Node resolved_options() const override { return YAML::Node(YAML::NodeType::Map); }
  Span span() const override { return Span::Run; }
  Schedule schedule(int stages, int units) const override {
    const Schedule plain = schedules::one_f_one_b(stages, units);
    Schedule compute(stages);
    for (int r = 0; r < stages; ++r) {
      for (const Action& a : plain.device(r)) {
        if (a.kind == ActionKind::Backward && a.mb % 2 == 1) {
          compute.add(r, Action::I(r, a.mb));
          compute.add(r, Action::W(r, a.mb));
          continue;
        }
        compute.add(r, a);
        if (a.kind == ActionKind::Forward) compute.add(r, Action::H(r, a.mb));
      }
    }
    return compute;
  }
  ValidateOptions schedule_rules(int stages) const override {  // it runs every kind of action
    ValidateOptions o = Scheme::schedule_rules(stages);
    o.kinds.push_back(ActionKind::Head);
    return o;
  }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    return std::make_unique<CountingPolicy>(counts_.at(static_cast<size_t>(stage.index())));
  }

 private:
  Counts& counts_;
};

TEST(FlushlessHooks, FlushNeverRunsTheSchemesOwnRoutes) {
  const char* yaml = R"(
model:     {type: mlp, sizes: [6, 8, 8, 3]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [6], classes: 3}
partition: {stages: 2}
scheme:    {type: pipedream, flush: never}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 2, batch_size: 16, threads: 1}
)";
  testing::TempDir dir;
  Experiment e = testing::experiment(yaml, dir.file("run"));
  Counts counts(2);
  e.scheme = std::make_unique<CountingScheme>(counts);  // the YAML's scheme only got the run parsed
  RunnerOptions options;
  options.quiet = true;
  Runner runner(e, options);
  RunSummary summary;
  ASSERT_NO_THROW(summary = runner.run());
  EXPECT_EQ(summary.history.size(), 2u);
  // 2 epochs of 4 micro-batches: B for the even ones, I and W for the odd ones, H for each.
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(counts[r]["backward"], 4) << "stage " << r;
    EXPECT_EQ(counts[r]["backward_input"], 4) << "stage " << r;
    EXPECT_EQ(counts[r]["backward_weight"], 4) << "stage " << r;
    EXPECT_EQ(counts[r]["head"], 8) << "stage " << r;
  }
}

}  // namespace
}  // namespace pipelab
