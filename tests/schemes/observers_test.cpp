// Observers (core/exec/observer.h): the one action interpreter tells each of a stage's
// observers about its actions, in schedule order, on every executor, after the policy's
// hooks chose the weights; evaluation tells them nothing. The flush-never snapshots and the
// shadow run are such observers, so a run with them goes through the scheme's own gradient
// routes (B, I, W, H) exactly as one without: the last test holds a flush-never run to that.
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "core/records/epoch_snapshots.h"
#include "core/schedule/generators.h"
#include "tests/support/helpers.h"
#include "tests/support/linear_pipeline.h"

namespace pipelab::observers_test {
namespace {

/// Writes down what it is told, per stage, as "forward 1", "update>".
class Recording : public ActionObserver {
 public:
  void forward(Stage& s, int mb) override { note(s, fmt::format("forward {}", mb)); }
  void backward(Stage& s, int mb) override { note(s, fmt::format("backward {}", mb)); }
  void backward_done(Stage& s, int mb) override { note(s, fmt::format("done {}", mb)); }
  void before_update(Stage& s) override { note(s, "<update"); }
  void after_update(Stage& s) override { note(s, "update>"); }
  std::map<int, std::vector<std::string>> heard;

 private:
  void note(Stage& s, std::string what) {
    std::lock_guard<std::mutex> lock(mutex_);
    heard[s.index()].push_back(std::move(what));
  }
  std::mutex mutex_;
};

class Ones : public Feed {
 public:
  at::Tensor input(int mb) override { return at::ones({2, 4}) * (mb + 1); }
  at::Tensor target(int) override { return at::zeros({2}, at::kLong); }
  void on_result(int, const MicroBatchResult&) override {}
};

// Stage 0 splits micro-batch 1's backward (I, then W after B0); stage 1 runs the whole B of
// micro-batch 1 and splits micro-batch 0's.
const char* kEveryKind = R"(
d0: 0F0 0F1 0I1 0B0 0W1 0U
d1: 1F0 1F1 1B1 1I0 1W0 1U
)";

const std::map<int, std::vector<std::string>> kHeard{
    {0, {"forward 0", "forward 1", "backward 1", "backward 0", "done 0", "done 1", "<update", "update>"}},
    {1, {"forward 0", "forward 1", "backward 1", "done 1", "backward 0", "done 0", "<update", "update>"}}};

TEST(Observers, HearEveryActionInScheduleOrderOnEveryExecutor) {
  for (const char* executor : {"{type: sequential}", "{type: threaded, intra_op_threads: 1}"}) {
    testing::LinearPipeline p("{type: gpipe, chunks: 2}", "{type: sgd, lr: 0.1}", 2, 4);
    Recording first, second;
    for (StageSlot& slot : p.slots) slot.observers = {&first, &second};
    Ones feed;
    testing::make_executor(executor)->run(Schedule::parse(kEveryKind), p.slots, feed, RunMode::Train);
    EXPECT_EQ(first.heard, kHeard) << executor;
    EXPECT_EQ(second.heard, kHeard) << executor << ": every observer of a stage is told";
  }
}

TEST(Observers, EvaluationTellsNothing) {
  testing::LinearPipeline p("{type: gpipe, chunks: 2}", "{type: sgd, lr: 0.1}", 2, 4);
  Recording heard;
  for (StageSlot& slot : p.slots) slot.observers = {&heard};
  Ones feed;
  testing::make_executor("{type: sequential}")->run(Schedule::parse("d0: 0F0 0F1\nd1: 1F0 1F1"), p.slots, feed, RunMode::Eval);
  EXPECT_TRUE(heard.heard.empty());
}

TEST(Observers, TheEpochSnapshotSavesAfterTheUpdateThatEndsAnEpoch) {
  testing::TempDir dir;
  StageSpec spec;
  spec.blocks.push_back({"linear", torch::nn::AnyModule(torch::nn::Linear(2, 2))});
  spec.loss = std::make_shared<CrossEntropyLoss>();
  Stage stage(std::move(spec));
  EpochSnapshot snapshot(dir.path(), 2);  // two micro-batches per epoch
  snapshot.backward_done(stage, 0);
  snapshot.after_update(stage);
  EXPECT_FALSE(std::filesystem::exists(EpochSnapshot::path(dir.path(), 1, 0))) << "epoch 1 is not over";
  snapshot.backward_done(stage, 1);
  EXPECT_FALSE(std::filesystem::exists(EpochSnapshot::path(dir.path(), 1, 0))) << "saved before its update";
  snapshot.after_update(stage);
  EXPECT_TRUE(std::filesystem::exists(EpochSnapshot::path(dir.path(), 1, 0)));
}

/// Per stage, how often the scheme's own routes ran.
using Counts = std::vector<std::map<std::string, int>>;

/// A gradient route with its own B and H (end-to-end gradients, counted).
class CountingRoute : public GradientRoute {
 public:
  explicit CountingRoute(std::map<std::string, int>& counts) : counts_(counts) {}
  Message backward(Stage& s, int mb, const std::vector<Message>& in) override {
    ++counts_["backward"];
    return GradientRoute::backward(s, mb, in);
  }
  Message head(Stage&, int) override {
    ++counts_["head"];
    return {};
  }

 private:
  std::map<std::string, int>& counts_;
};

/// A weight policy that counts the backward hooks (B, or I then W).
class CountingPolicy : public StagePolicy {
 public:
  explicit CountingPolicy(std::map<std::string, int>& counts) : counts_(counts) {}
  void before_backward(Stage&, int) override { ++counts_["before_backward"]; }
  void after_backward(Stage&, int) override { ++counts_["after_backward"]; }

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
  std::shared_ptr<const StageAddOns> add_ons() const override { return std::make_shared<const Routes>(counts_); }

 private:
  class Routes : public StageAddOns {
   public:
    explicit Routes(Counts& counts) : counts_(counts) {}
    std::unique_ptr<GradientRoute> route(Stage& stage) const override {
      return std::make_unique<CountingRoute>(counts_.at(static_cast<size_t>(stage.index())));
    }

   private:
    Counts& counts_;
  };
  Counts& counts_;
};

TEST(Observers, FlushNeverRunsTheSchemesOwnRoutes) {
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
  // The route computes B and H; the policy's hooks run around B and around I..W alike.
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(counts[r]["backward"], 4) << "stage " << r;
    EXPECT_EQ(counts[r]["head"], 8) << "stage " << r;
    EXPECT_EQ(counts[r]["before_backward"], 8) << "stage " << r;
    EXPECT_EQ(counts[r]["after_backward"], 8) << "stage " << r;
  }
}

}  // namespace
}  // namespace pipelab::observers_test
