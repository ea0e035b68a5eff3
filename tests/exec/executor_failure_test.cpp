// What the threaded executor does when a stage fails: every stage stops (no hang) and the
// caller sees the original error, not a cancellation; and stages really run on threads.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "core/exec/executor.h"
#include "core/util/error.h"
#include "tests/support/helpers.h"
#include "tests/support/linear_pipeline.h"

namespace pipelab::executor_failure_test {
namespace {

/// Four Linear(4, 4) stages under GPipe with 4 micro-batches.
struct Pipeline : testing::LinearPipeline {
  Pipeline() : LinearPipeline("{type: gpipe, chunks: 4}", "{type: sgd, lr: 0.1}", 4, 4) {}
};

/// Micro-batches of 2 examples; throws `failure` from input() (stage 0's thread) or
/// on_result() (the last stage's thread) at micro-batch `fail_at`.
class Data : public Feed {
 public:
  enum class Where { Nowhere, Input, Result, Shape };
  Data(Where where, int fail_at) : where_(where), fail_at_(fail_at) {}
  at::Tensor input(int mb) override {
    note_thread();
    if (where_ == Where::Input && mb == fail_at_) throw UserError("input of micro-batch 2 is broken");
    if (where_ == Where::Shape && mb == fail_at_) return at::ones({2, 5});  // Linear(4, 4) cannot take it
    return at::ones({2, 4}) * (mb + 1);
  }
  at::Tensor target(int) override { return at::zeros({2}, at::kLong); }
  double loss_scale(int) override { return 0.25; }
  void on_result(int mb, const MicroBatchResult&) override {
    note_thread();
    if (where_ == Where::Result && mb == fail_at_) throw std::runtime_error("the loss of micro-batch 1 is broken");
  }
  std::set<std::thread::id> threads() {
    std::lock_guard<std::mutex> lock(mutex_);
    return threads_;
  }

 private:
  void note_thread() {
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.insert(std::this_thread::get_id());
  }
  Where where_;
  int fail_at_;
  std::mutex mutex_;
  std::set<std::thread::id> threads_;
};

std::unique_ptr<Executor> threaded() { return testing::make_executor("{type: threaded, intra_op_threads: 1}"); }

TEST(ThreadedExecutor, StagesRunOnTheirOwnThreads) {
  Pipeline p;
  Data data(Data::Where::Nowhere, -1);
  auto executor = threaded();
  executor->run(p.scheme->schedule(4, 4), p.slots, data, RunMode::Train);
  const auto threads = data.threads();
  EXPECT_EQ(threads.size(), 2u) << "stage 0 and stage 3 report from two threads";
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u) << "no stage runs on the caller's thread";
  EXPECT_EQ(executor->stats().time[ActionKind::Forward][2].count, 4);
  EXPECT_EQ(executor->stats().messages_backward[0], 4);
}

TEST(ThreadedExecutor, AFailingFirstStageStopsEveryStageWithItsOwnError) {
  Pipeline p;
  Data data(Data::Where::Input, 2);
  auto executor = threaded();
  // Stages 1-3 are waiting for micro-batch 2 when stage 0 fails: they must be woken.
  EXPECT_EQ(testing::user_error([&] { executor->run(p.scheme->schedule(4, 4), p.slots, data, RunMode::Train); }),
            "input of micro-batch 2 is broken");
  // The executor's threads survive a failure: it runs fresh stages again.
  Pipeline fresh;
  Data good(Data::Where::Nowhere, -1);
  EXPECT_NO_THROW(executor->run(fresh.scheme->schedule(4, 4), fresh.slots, good, RunMode::Train));
}

TEST(ThreadedExecutor, AFailingLastStageStopsStagesWaitingForGradients) {
  Pipeline p;
  Data data(Data::Where::Result, 1);
  auto executor = threaded();
  try {
    executor->run(p.scheme->schedule(4, 4), p.slots, data, RunMode::Train);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the loss of micro-batch 1 is broken");
  }
}

TEST(Executors, AnActionThatFailsIsShownInItsDevicesSchedule) {
  // As torch.distributed.pipelining reports a failed action: the error, then the device's
  // actions around it with the failing one marked.
  for (const char* type : {"{type: sequential}", "{type: threaded, intra_op_threads: 1}"}) {
    Pipeline p;
    Data data(Data::Where::Shape, 2);
    auto executor = testing::make_executor(type);
    try {
      executor->run(p.scheme->schedule(4, 4), p.slots, data, RunMode::Train);
      FAIL() << "no error";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("while running\n  d0: 0F0 0SEND_F0 0F1 0SEND_F1 0F2 <-- ERROR HERE 0SEND_F2 0F3"), std::string::npos)
          << type << ": " << what;
      EXPECT_NE(what.find("mat1 and mat2 shapes cannot be multiplied"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace pipelab::executor_failure_test
