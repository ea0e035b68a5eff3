// PipeDream's replicated stages (`partition.replicas: [2, 1, 1]`, its 1F1B-RR; SOSP'19 section 3.2):
// the schedule as data (golden order from the runtime's warm-up rule, peers of the messages
// that cross to another replica), a hand-computed float64 oracle of the training it defines,
// sequential == threaded bit for bit, and clear refusals where the combination is undefined.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/io/pt_file.h"
#include "core/model/block_io.h"
#include "core/schedule/dataflow.h"
#include "core/schedule/generators.h"
#include "core/schedule/lower.h"
#include "core/schedule/validate.h"
#include "core/scheme/replicas.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::replicated_stages_test {
namespace {

TEST(ReplicatedStages, TheLayoutNumbersStagesReplicaByReplica) {
  const StageLayout layout({2, 1, 1});
  EXPECT_EQ(layout.stages(), 4);
  EXPECT_FALSE(layout.uniform());
  // Replica 0 of every stage, then stage 0's second replica.
  EXPECT_EQ(layout.stage(0, 0), 0);
  EXPECT_EQ(layout.stage(2, 0), 2);
  EXPECT_EQ(layout.stage(0, 1), 3);
  EXPECT_EQ(layout.stage(1, 1), -1);
  EXPECT_EQ(layout.position(3), 0);
  EXPECT_EQ(layout.replica(3), 1);
  // Equal counts number replica r's stage p as r * S + p (whole pipelines).
  EXPECT_EQ(StageLayout::uniform(3, 2).stage(1, 1), 4);
}

TEST(ReplicatedStages, OneFOneBRoundRobinFollowsPipeDreamsWarmupRule) {
  // w_p = (N - 1 - sum_{i<p} R_i) / R_p over N = 4 devices: 1, 1, 0. Stage 0's replicas take
  // the even and the odd mini-batches.
  EXPECT_EQ(schedules::round_robin_warmups({2, 1, 1}), (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(schedules::round_robin_warmups({1, 3, 1}), (std::vector<int>{4, 1, 0}));
  const Schedule s = schedules::one_f_one_b_round_robin({2, 1, 1}, 6);
  EXPECT_EQ(s.to_text(),
            "d0: 0F0 0F2 0B0 0U 0F4 0B2 0U 0B4 0U\n"
            "d1: 1F0 1F1 1B0 1U 1F2 1B1 1U 1F3 1B2 1U 1F4 1B3 1U 1F5 1B4 1U 1B5 1U\n"
            "d2: 2F0 2B0 2U 2F1 2B1 2U 2F2 2B2 2U 2F3 2B3 2U 2F4 2B4 2U 2F5 2B5 2U\n"
            "d3: 3F1 3F3 3B1 3U 3F5 3B3 3U 3B5 3U\n");
  // An odd count: the replica with one mini-batch fewer still updates as often.
  EXPECT_EQ(schedules::one_f_one_b_round_robin({2, 1}, 5).device(2),
            Schedule::parse("d0: 2F1 2F3 2B1 2U 2B3 2U 2U").device(0));
  // One replica per stage is PipeDream's plain 1F1B.
  EXPECT_EQ(schedules::one_f_one_b_round_robin({1, 1, 1}, 5).to_text(), schedules::one_f_one_b(3, 5).to_text());
}

TEST(ReplicatedStages, MessagesNameTheReplicaThatTakesTheMiniBatch) {
  const Schedule s = replicated_stages_schedule({2, 1, 1}, 6);
  const std::string text = s.to_text();
  // Stage 3 (stage 0's second replica) sends to stage 1, which sends gradients back to it;
  // a neighbour's message names no peer.
  for (const char* a : {"3SEND_F1>1", "1RECV_F1<3", "1SEND_B1>3", "3RECV_B1<1", " 0SEND_F0 ", " 1SEND_B0 "}) {
    EXPECT_NE(text.find(a), std::string::npos) << a << "\n" << text;
  }
  // Each U follows an ALLREDUCE of its stage's replicas: stages 0 and 3 meet, stage 1 alone.
  EXPECT_EQ(s.collective_group(3), 0);
  EXPECT_EQ(s.collective_group(1), 1);
  // The text reads back, and the schedule passes the scheme's rules and runs to its end.
  Schedule back = Schedule::parse(text);
  back.copy_layout(s);
  EXPECT_EQ(back, s);
  const auto scheme = Registry<Scheme>::get().create(
      ConfigNode(YAML::Load("{type: pipedream}"), std::make_shared<ConfigSource>("case"), "scheme"));
  EXPECT_NO_THROW(validate_schedule(s, replicated_stages_rules(*scheme, {2, 1, 1})));
  EXPECT_TRUE(walk_schedule(s, [](int, size_t) {}).complete);
  // A peer that is not a stage, and a peer on a compute action, are clear errors.
  EXPECT_NE(testing::user_error([] { Schedule::parse("0F0 0SEND_F0>x"); }).find("peer 'x'"), std::string::npos);
  EXPECT_NE(testing::user_error([] { Schedule::parse("0F0>1"); }).find("F has no peer"), std::string::npos);
}

// Two stages, [2, 1]; every example the same, so that every mini-batch has the same loss
// function and the oracle needs no data order.
struct Oracle {
  testing::TempDir dir;
  std::string yaml;
  std::vector<Block> blocks;
  at::Tensor x, y;

  explicit Oracle(int mini_batches) {
    DataSpec spec;
    spec.input_shape = {3};
    spec.classes = 2;
    blocks = testing::build_model(testing::define_model("{type: mlp, sizes: [3, 4, 2], activation: tanh}", spec));
    TensorDict init;
    for (Block& b : blocks) {
      b.module.ptr()->to(at::kDouble);
      for (const auto& kv : b.module.ptr()->named_parameters()) init.push_back({b.name + "." + kv.key(), kv.value()});
    }
    save_tensor_dict(dir.file("init.pt"), init);
    x = at::tensor({0.5, -1.0, 2.0}, at::kDouble).unsqueeze(0);
    y = at::tensor({1}, at::kLong);
    // n mini-batches of 4 for training, one for the test.
    for (const auto& [file, rows] : {std::make_pair("train.pt", 4 * mini_batches), std::make_pair("test.pt", 4)}) {
      c10::impl::GenericDict d(c10::StringType::get(), c10::TensorType::get());
      d.insert("x", x.repeat({rows, 1}));
      d.insert("y", y.repeat({rows}));
      save_pt(dir.file(file), d);
    }
    yaml = fmt::format(R"(
model:     {{type: mlp, sizes: [3, 4, 2], activation: tanh}}
dataset:   {{type: tensors, path: '{}', test_path: '{}', classes: 2}}
partition: {{stages: 2, balance: [1, 1], replicas: [2, 1]}}
scheme:    {{type: pipedream}}
optimizer: {{type: sgd, lr: 0.3}}
init:      {{from: '{}'}}
run:       {{epochs: 1, batch_size: 4, seed: 5, dtype: float64}}
)",
                       dir.file("train.pt"), dir.file("test.pt"), dir.file("init.pt"));
  }

  /// Stage s's parameters (block s).
  std::vector<at::Tensor> weights(int s) { return blocks[static_cast<size_t>(s)].module.ptr()->parameters(); }

  /// The gradients of the loss with stage 0 at `w0` and stage 1 at `w1`.
  std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> gradients(const std::vector<at::Tensor>& w0,
                                                                        const std::vector<at::Tensor>& w1) {
    std::vector<at::Tensor> live = weights(0), last = weights(1);
    at::NoGradGuard outer;
    for (size_t k = 0; k < live.size(); ++k) live[k].copy_(w0[k]);
    for (size_t k = 0; k < last.size(); ++k) last[k].copy_(w1[k]);
    at::AutoGradMode on(true);
    for (at::Tensor& p : live) p.mutable_grad() = at::Tensor();
    for (at::Tensor& p : last) p.mutable_grad() = at::Tensor();
    LiveSet set(x);
    for (Block& b : blocks) set.run(b);
    at::cross_entropy_loss(set.get("x"), y).backward();
    std::vector<at::Tensor> g0, g1;
    for (const at::Tensor& p : live) g0.push_back(p.grad().clone());
    for (const at::Tensor& p : last) g1.push_back(p.grad().clone());
    return {g0, g1};
  }
};

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : ts) out.push_back(t.detach().clone());
  return out;
}

TEST(ReplicatedStages, TrainingEqualsTheHandComputedOneFOneBRoundRobin) {
  // Stage 0 has two replicas (warm-up 1 each), stage 1 one (warm-up 0). Mini-batch k:
  // replica k % 2 of stage 0 runs its forward and backward with version max(0, k / 2 - 1)
  // (its replica's (k/2)-th forward follows that many updates; the stash keeps it for the
  // backward); stage 1 runs both with version k. Stage 1 steps by lr R_1 / R_0 = lr / 2
  // after every mini-batch; stage 0's replicas step together after each pair by lr times
  // the mean of the pair's gradients (DDP), an odd last one averaged with nothing.
  for (const int n : {6, 5}) {
    Oracle o(n);
    const double lr = 0.3;
    std::vector<std::vector<at::Tensor>> v0{clones(o.weights(0))};
    std::vector<at::Tensor> v1 = clones(o.weights(1));
    std::vector<at::Tensor> pair;
    for (int k = 0; k < n; ++k) {
      const int version = std::max(0, k / 2 - 1);
      const auto [g0, g1] = o.gradients(v0[static_cast<size_t>(version)], v1);
      for (size_t i = 0; i < v1.size(); ++i) v1[i] = v1[i] - lr / 2 * g1[i];
      if (pair.empty()) {
        pair = g0;
      } else {
        for (size_t i = 0; i < pair.size(); ++i) pair[i] = pair[i] + g0[i];
      }
      if (k % 2 == 1 || k + 1 == n) {
        std::vector<at::Tensor> next = clones(v0.back());
        for (size_t i = 0; i < next.size(); ++i) next[i] = next[i] - lr * pair[i] / 2;
        v0.push_back(next);
        pair.clear();
      }
    }
    const TensorDict got = testing::train(o.yaml);
    std::vector<at::Tensor> want = v0.back();
    want.insert(want.end(), v1.begin(), v1.end());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_LT((got[i].second - want[i]).abs().max().item<double>(), 1e-12) << got[i].first << " n=" << n;
    }
  }
}

const char* kThree = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 96, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 3, balance: [2, 1, 1], replicas: [2, 1, 1]}
scheme:    {type: pipedream}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9, weight_decay: 1.0e-3}
run:       {epochs: 2, batch_size: 8, seed: 3, dtype: float64}
)";

TEST(ReplicatedStages, ThreadedEqualsSequentialBitwiseAndReplicasMatter) {
  const char* threaded = "run.executor={type: threaded, intra_op_threads: 1}";
  const TensorDict sequential = testing::train(kThree, {"run.executor={type: sequential}"});
  EXPECT_TRUE(testing::identical(sequential, testing::train(kThree, {threaded})));
  // The replicas change the training (the first stage steps every second mini-batch).
  EXPECT_GT(testing::max_difference(sequential, testing::train(kThree, {"partition.replicas=1"})), 1e-6);
}

TEST(ReplicatedStages, UndefinedCombinationsAreRefusedClearly) {
  const auto refused = [](const std::vector<std::string>& sets) {
    return testing::user_error([&] { testing::train(kThree, sets); });
  };
  std::string e = refused({"scheme={type: gpipe, chunks: 2}"});
  EXPECT_NE(e.find("partition.replicas"), std::string::npos) << e;
  EXPECT_NE(e.find("scheme gpipe cannot run replicated stages"), std::string::npos) << e;
  EXPECT_NE(e.find("Fix:"), std::string::npos) << e;
  e = refused({"scheme={type: pipedream, vertical_sync: true}"});
  EXPECT_NE(e.find("vertical_sync"), std::string::npos) << e;
  e = refused({"scheme={type: pipedream_2bw}"});
  EXPECT_NE(e.find("cannot run replicated stages"), std::string::npos) << e;
  e = refused({"partition.replicas=[2, 1]"});
  EXPECT_NE(e.find("2 replica counts for 3 pipeline stages"), std::string::npos) << e;
  e = refused({"partition.replicas=[2, 0, 1]"});
  EXPECT_NE(e.find("partition.replicas[1]"), std::string::npos) << e;
  e = refused({"scheme={type: pipedream, flush: never}"});
  EXPECT_NE(e.find("scheme.flush"), std::string::npos) << e;
  e = refused({"optimizer.clip_grad_norm=1.0"});
  EXPECT_NE(e.find("clip_grad_norm"), std::string::npos) << e;
}

}  // namespace
}  // namespace pipelab::replicated_stages_test
