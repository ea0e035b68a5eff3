// Same config + same seed = the same bytes, on CPU: metrics, and the final checkpoint.
#include <gtest/gtest.h>

#include <map>

#include "core/records/state_dict.h"
#include "tests/support/helpers.h"

namespace pipelab::reproducibility_test {
namespace {

const char* kCnn = R"(
model:     {type: cnn, channels: [4, 8], hidden: 16, batch_norm: true, dropout: 0.2}
dataset:   {type: synthetic, samples: 96, test_samples: 24, shape: [1, 8, 8], classes: 3}
partition: {stages: 3, balance: auto}
scheme:    {type: gpipe, chunks: 2, deferred_batch_norm: true}
optimizer: {type: adamw, lr: 0.01, weight_decay: 0.01}
lr_schedule: {type: cosine, warmup_epochs: 1, granularity: step}
run:       {epochs: 2, batch_size: 16, seed: 11}
)";

TEST(Reproducibility, TwoRunsWriteTheSameBytes) {
  testing::TempDir dir;
  for (const char* name : {"a", "b"}) {
    Experiment e = testing::experiment(kCnn, dir.file(name));
    Runner(e, {false, true}).run();
  }
  for (const char* file : {"metrics/steps.csv", "metrics/steps.jsonl", "checkpoints/final.pt"}) {
    const std::string a = testing::read_text(dir.file(std::string("a/") + file));
    EXPECT_FALSE(a.empty()) << file;
    EXPECT_TRUE(a == testing::read_text(dir.file(std::string("b/") + file))) << file << " differs";
  }
  // Per-epoch losses and accuracies too (times differ, of course).
  const auto columns = [&](const std::string& run) {
    std::string out, line;
    std::istringstream in(testing::read_text(dir.file(run + "/metrics/epochs.csv")));
    while (std::getline(in, line)) {
      size_t comma = 0;
      for (int k = 0; k < 5; ++k) comma = line.find(',', comma + 1);
      out += line.substr(0, comma) + "\n";
    }
    return out;
  };
  EXPECT_EQ(columns("a"), columns("b"));
  // A different seed gives a different run.
  Experiment c = testing::experiment(kCnn, dir.file("c"), {"run.seed=12"});
  Runner(c, {false, true}).run();
  EXPECT_NE(testing::read_text(dir.file("a/metrics/steps.csv")), testing::read_text(dir.file("c/metrics/steps.csv")));
}

TEST(Reproducibility, InitFromCheckpointContinuesTraining) {
  testing::TempDir dir;
  Experiment a = testing::experiment(kCnn, dir.file("a"));
  Runner(a, {false, true}).run();
  // A run initialised from the checkpoint starts from exactly those weights: evaluated
  // before any update (lr ~ 0 for one step would still move it), its weights equal them.
  Experiment b = testing::experiment(kCnn, dir.file("b"), {"init.from=" + dir.file("a/checkpoints/final.pt")});
  Runner runner(b, {false, true});
  EXPECT_TRUE(testing::identical(load_tensor_dict(dir.file("a/checkpoints/final.pt")), model_state(runner.stages())));
  // Missing or misshapen entries are refused.
  TensorDict state = load_tensor_dict(dir.file("a/checkpoints/final.pt"));
  state.erase(state.begin());
  save_tensor_dict(dir.file("partial.pt"), state);
  EXPECT_NE(testing::user_error([&] {
              Experiment e = testing::experiment(kCnn, dir.file("c"), {"init.from=" + dir.file("partial.pt")});
              Runner r(e, {false, true});
            }).find("model entries the file does not have: conv1.conv.weight"),
            std::string::npos);
  EXPECT_NO_THROW({
    Experiment e = testing::experiment(kCnn, dir.file("c"), {"init.from=" + dir.file("partial.pt"), "init.strict=false"});
    Runner r(e, {false, true});
  });
  state.front().second = at::zeros({1});
  save_tensor_dict(dir.file("bad.pt"), state);
  EXPECT_NE(testing::user_error([&] {
              Experiment e = testing::experiment(kCnn, dir.file("c"), {"init.from=" + dir.file("bad.pt")});
              Runner r(e, {false, true});
            }).find("shapes differ"),
            std::string::npos);
  state.front() = {"conv9.weight", at::zeros({1})};
  save_tensor_dict(dir.file("renamed.pt"), state);
  EXPECT_NE(testing::user_error([&] {
              Experiment e = testing::experiment(kCnn, dir.file("c"), {"init.from=" + dir.file("renamed.pt")});
              Runner r(e, {false, true});
            }).find("entries the model does not have: conv9.weight"),
            std::string::npos);
  // Non-strict, as load_state_dict(strict=False): extra entries are ignored, missing ones
  // keep their initial values, and the run's log says which.
  Experiment lax = testing::experiment(kCnn, dir.file("lax"), {"init.from=" + dir.file("renamed.pt"), "init.strict=false",
                                                               "run.epochs=1"});
  Runner(lax, {false, true}).run();
  const std::string log = testing::read_text(dir.file("lax/log.txt"));
  EXPECT_NE(log.find("1 entry not in the model, ignored: conv9.weight"), std::string::npos) << log;
  EXPECT_NE(log.find("2 entries not in the file, kept at their initial values: conv1.conv.weight"), std::string::npos) << log;
  const size_t tensors = model_state(runner.stages()).size();
  EXPECT_NE(log.find(fmt::format("renamed.pt: loaded {} of the model's {} tensors", tensors - 2, tensors)),
            std::string::npos)
      << log;
  // A non-strict file that matches nothing would train from scratch: refused.
  save_tensor_dict(dir.file("foreign.pt"), {{"fc.weight", at::zeros({2})}, {"fc.bias", at::zeros({2})}});
  const std::string foreign = testing::user_error([&] {
    Experiment e = testing::experiment(kCnn, dir.file("f"), {"init.from=" + dir.file("foreign.pt"), "init.strict=false"});
    Runner r(e, {false, true});
  });
  EXPECT_NE(foreign.find("foreign.pt: none of its 2 entries is a tensor of the model (the file has fc.weight, fc.bias"),
            std::string::npos)
      << foreign;
}

TEST(Reproducibility, FineTuningSkipsTensorsOfAnotherShapeWhenAsked) {
  // A 5-class model's weights onto a 3-class model (a published model onto another head):
  // refused by default with the fix, and with init.skip_mismatched every tensor of the same
  // shape loads, the head keeps its initial values and the log names it.
  const std::string yaml = R"(
model:     {type: mlp, sizes: [12, 16, 16, 5]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 5}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 16, seed: 1}
)";
  testing::TempDir dir;
  Experiment a = testing::experiment(yaml, dir.file("a"));
  Runner(a, {false, true}).run();
  const TensorDict saved = load_tensor_dict(dir.file("a/checkpoints/final.pt"));
  const std::vector<std::string> three = {"model.sizes=[12, 16, 16, 3]", "dataset.classes=3",
                                          "init.from=" + dir.file("a/checkpoints/final.pt")};
  const auto refusal = [&](const std::vector<std::string>& sets) {
    return testing::user_error([&] {
      Experiment e = testing::experiment(yaml, dir.file("refused"), sets);
      Runner r(e, {false, true});
    });
  };
  EXPECT_NE(refusal(three).find("set init.skip_mismatched: true"), std::string::npos);
  std::vector<std::string> skip = three;
  skip.push_back("init.skip_mismatched=true");
  Experiment c = testing::experiment(yaml, dir.file("c"), skip);
  Runner runner(c, {false, true});
  int same = 0, other = 0;
  const std::map<std::string, at::Tensor> mine = [&] {
    std::map<std::string, at::Tensor> m;
    for (const auto& [name, t] : model_state(runner.stages())) m[name] = t;
    return m;
  }();
  for (const auto& [name, t] : saved) {
    if (t.sizes() == mine.at(name).sizes()) {
      EXPECT_TRUE(at::equal(t, mine.at(name))) << name;
      ++same;
    } else {
      ++other;
    }
  }
  EXPECT_EQ(other, 2);  // the head's weight and bias
  EXPECT_GT(same, 0);
  runner.run();
  const std::string log = testing::read_text(dir.file("c/log.txt"));
  EXPECT_NE(log.find("2 entries of another shape skipped (init.skip_mismatched), kept at their initial values"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("(file [5, 16], model [3, 16])"), std::string::npos) << log;
  // The count is of every tensor the model has, the two skipped ones included.
  EXPECT_NE(log.find(fmt::format("loaded {} of the model's {} tensors", same, same + other)), std::string::npos)
      << log;
  // A file whose every tensor differs in shape would load nothing: refused.
  std::vector<std::string> wide = skip;
  wide.push_back("model.sizes=[12, 32, 32, 3]");
  EXPECT_NE(refusal(wide).find("would load nothing"), std::string::npos);
}

TEST(Reproducibility, InterlockingCheckpointLoadsBackWithItsHeads) {
  const char* yaml = R"(
model:     {type: mlp, sizes: [12, 16, 16, 16, 3]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 3}
partition: {stages: 3}
scheme:    {type: interlocking, mode: pairwise}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 16, seed: 1}
)";
  testing::TempDir dir;
  Experiment a = testing::experiment(yaml, dir.file("a"));
  Runner(a, {false, true}).run();
  const TensorDict saved = load_tensor_dict(dir.file("a/checkpoints/final.pt"));
  bool has_head = false;
  for (const auto& kv : saved) has_head = has_head || kv.first.find("head") != std::string::npos;
  EXPECT_TRUE(has_head);
  Experiment b = testing::experiment(yaml, dir.file("b"), {"init.from=" + dir.file("a/checkpoints/final.pt")});
  Runner runner(b, {false, true});
  EXPECT_TRUE(testing::identical(saved, model_state(runner.stages())));
}

}  // namespace
}  // namespace pipelab::reproducibility_test

namespace pipelab::reproducibility_test {
namespace {

TEST(Resume, InterruptedRunEndsWithTheSameBytes) {
  testing::TempDir dir;
  Experiment straight = testing::experiment(kCnn, dir.file("straight"), {"run.epochs=3"});
  Runner(straight, {false, true}).run();
  // Session 1 stops after one epoch (as if killed after its checkpoint), session 2 resumes.
  Experiment first = testing::experiment(kCnn, dir.file("resumed"), {"run.epochs=3"});
  RunnerOptions stop{false, true};
  stop.stop_after = 1;
  EXPECT_EQ(Runner(first, stop).run().status, "stopped");
  EXPECT_FALSE(RunRecord::finished(dir.file("resumed")));
  // A kill in the middle of epoch 2 leaves step lines of an unfinished epoch behind.
  testing::write_text(dir.file("resumed/metrics/steps.csv"),
                      testing::read_text(dir.file("resumed/metrics/steps.csv")) + "999,2,0.5,0.01,null\n");
  Experiment second = testing::experiment(kCnn, dir.file("resumed"), {"run.epochs=3"});
  RunnerOptions resume{false, true};
  resume.resume = true;
  const RunSummary s = Runner(second, resume).run();
  EXPECT_EQ(s.status, "finished");
  EXPECT_EQ(s.history.size(), 3u);
  // The summary's total counts the whole run, the first session's epoch too.
  double epochs = 0;
  for (const EpochMetrics& m : s.history) epochs += m.seconds;
  EXPECT_GE(s.seconds, epochs);
  for (const char* file : {"metrics/steps.csv", "metrics/steps.jsonl", "checkpoints/final.pt"}) {
    EXPECT_TRUE(testing::read_text(dir.file(std::string("straight/") + file)) ==
                testing::read_text(dir.file(std::string("resumed/") + file)))
        << file << " differs";
  }
  // Resuming a finished run does nothing; resuming with another configuration is refused.
  Experiment again = testing::experiment(kCnn, dir.file("resumed"), {"run.epochs=3"});
  EXPECT_EQ(Runner(again, resume).run().status, "already finished");
  Experiment other = testing::experiment(kCnn, dir.file("other"), {"run.epochs=3"});
  Runner(other, stop).run();
  Experiment changed = testing::experiment(kCnn, dir.file("other"), {"run.epochs=3", "optimizer.lr=0.02"});
  EXPECT_NE(testing::user_error([&] { Runner(changed, resume).run(); }).find("different configuration"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab::reproducibility_test
