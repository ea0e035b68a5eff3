// torch.distributed.pipelining's CSV (core/schedule/torch_csv.cpp): files in both of torch's
// formats train as they are (the compute_only and compute_comms dumps of one torch schedule give
// the same bits, and `single`'s numbers); every action type of docs/schedules.md's table is
// taken or refused as docs/schedules.md says; and, with the installed torch, torch's own
// generators' orders read back as pipelab generates them (ScheduleInterleavedZeroBubble over
// flexible micro-batch counts, ScheduleZBVZeroBubble) and torch's _load_csv reads what
// `pipelab schedule --csv` writes into the same order.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>

#include "core/schedule/lower.h"
#include "schemes/schedules/modern.h"
#include "tests/support/helpers.h"

namespace pipelab::torch_csv_test {
namespace {

// torch 2.15's ScheduleInterleaved1F1B, 2 ranks x 2 stages, 4 micro-batches: _dump_csv's
// compute_only rows (empty cells: idle slots), and the compute_comms rows its runtime lowers
// them to (written with torch_csv_check.py).
const char* kComputeOnly =
    "0F0,0F1,2F0,2F1,,,0F2,2B0,0F3,2B1,2F2,0B0,2F3,0B1,,2B2,,2B3,,0B2,,0B3\n"
    ",1F0,1F1,,3F0,3B0,3F1,3B1,1F2,1B0,1F3,1B1,3F2,3B2,3F3,3B3,,1B2,,1B3\n";
const char* kComputeComms =
    "0UNSHARD,2UNSHARD,0F0,0SEND_F0,2RECV_F0,0F1,0SEND_F1,2RECV_F1,2F0,2SEND_F0,2F1,2SEND_F1,"
    "2RECV_B0,0F2,0SEND_F2,2B0,2WAIT_SEND_F0,2SEND_B0,2RECV_B1,0F3,0SEND_F3,2RECV_F2,2B1,"
    "2WAIT_SEND_F1,2SEND_B1,0RECV_B0,2F2,2SEND_F2,2RECV_F3,0B0,0WAIT_SEND_F0,0RECV_B1,2F3,2SEND_F3,"
    "0B1,0WAIT_SEND_F1,2RECV_B2,2B2,2WAIT_SEND_F2,2SEND_B2,2RECV_B3,2B3,2WAIT_SEND_F3,2SEND_B3,"
    "2REDUCE_GRAD,2WAIT_REDUCE_GRAD,2RESHARD,0RECV_B2,0B2,0WAIT_SEND_F2,0RECV_B3,0B3,0WAIT_SEND_F3,"
    "0REDUCE_GRAD,0WAIT_REDUCE_GRAD,0RESHARD,2WAIT_SEND_B0,2WAIT_SEND_B1,2WAIT_SEND_B2,2WAIT_SEND_B3\n"
    "1UNSHARD,3UNSHARD,1RECV_F0,1F0,1SEND_F0,1RECV_F1,1F1,1SEND_F1,3RECV_F0,3F0,3RECV_F1,3B0,"
    "3SEND_B0,1RECV_F2,3F1,1RECV_B0,3B1,3SEND_B1,1RECV_F3,1F2,1SEND_F2,1RECV_B1,1B0,1WAIT_SEND_F0,"
    "1SEND_B0,3RECV_F2,1F3,1SEND_F3,1B1,1WAIT_SEND_F1,1SEND_B1,3RECV_F3,3F2,3B2,3SEND_B2,1RECV_B2,"
    "3F3,3B3,3SEND_B3,1RECV_B3,3REDUCE_GRAD,3WAIT_REDUCE_GRAD,3RESHARD,1B2,1WAIT_SEND_F2,1SEND_B2,"
    "1B3,1WAIT_SEND_F3,1SEND_B3,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,1RESHARD,3WAIT_SEND_B0,3WAIT_SEND_B1,"
    "1WAIT_SEND_B0,1WAIT_SEND_B1,3WAIT_SEND_B2,3WAIT_SEND_B3,1WAIT_SEND_B2,1WAIT_SEND_B3\n";

const char* kFour = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 32, test_samples: 8, shape: [12], classes: 4}
partition: {stages: 4}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 8, seed: 4, threads: 1, dtype: float64}
)";

/// Every device's actions but U, in order.
std::vector<std::vector<Action>> without_updates(const Schedule& s) {
  std::vector<std::vector<Action>> out(static_cast<size_t>(s.devices()));
  const Schedule compute = s.compute_only();
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : compute.device(d)) {
      if (a.kind != ActionKind::Update) out[static_cast<size_t>(d)].push_back(a);
    }
  }
  return out;
}

TEST(TorchCsv, BothOfTorchsFormatsTrainAsTheyAre) {
  testing::TempDir dir;
  testing::write_text(dir.file("only.csv"), kComputeOnly);
  testing::write_text(dir.file("comms.csv"), kComputeComms);
  const Schedule only = Schedule::parse_csv(kComputeOnly, "only.csv");
  const Schedule comms = Schedule::parse_csv(kComputeComms, "comms.csv");
  // The same compute order; one U per stage after its last action (torch steps outside).
  EXPECT_EQ(without_updates(only), without_updates(comms));
  EXPECT_EQ(only.device(0).back(), Action::U(0));
  EXPECT_EQ(only.device(1).back(), Action::U(1));
  const TensorDict single = testing::train(kFour);
  const TensorDict a = testing::train(kFour, {"scheme={type: custom, file: '" + dir.file("only.csv") + "'}"});
  const TensorDict b = testing::train(kFour, {"scheme={type: custom, file: '" + dir.file("comms.csv") + "'}",
                                              "run.executor=threaded"});
  EXPECT_TRUE(testing::identical(a, b));
  EXPECT_LT(testing::max_difference(single, a), 1e-10);
}

TEST(TorchCsv, EveryActionTypeIsTakenOrRefused) {
  // A compound runs its parts in order; REDUCE_GRAD after the stage's last backward goes.
  const Schedule s = Schedule::parse_csv("0F0,(0F1;0B0)OVERLAP_F_B,0B1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n", "c.csv");
  EXPECT_EQ(s.to_text(), "d0: 0F0 0F1 0B0 0B1 0U\n");
  const auto refused = [](const std::string& text) {
    return testing::user_error([&] { Schedule::parse_csv(text, "bad.csv"); });
  };
  const std::string early = refused("0F0,0F1,0B0,0REDUCE_GRAD,0B1\n");
  EXPECT_NE(early.find("bad.csv:1:13"), std::string::npos) << early;
  EXPECT_NE(early.find("REDUCE_GRAD comes before its 0B1"), std::string::npos) << early;
  EXPECT_NE(refused("0F0,(0F1;0B0)OVERLAP\n").find("bad.csv:1:5"), std::string::npos);
  EXPECT_NE(refused("0F0,0X0\n").find("bad action '0X0'"), std::string::npos);
  // pipelab writes torch's compute_only form: no U, no messages; a head has no torch name.
  EXPECT_EQ(Schedule::parse("d0: 0F0 0SEND_F0 0B0 0U\nd1: 1RECV_F0 1F0 1B0 1U").to_csv(), "0F0,0B0\r\n1F0,1B0\r\n");
  EXPECT_NE(testing::user_error([] { Schedule::parse("0F0 0H0 0B0 0U").to_csv(); }).find("0H0"), std::string::npos);
}

TEST(TorchCsv, TorchsOwnOrdersAreOurs) {
  if (!testing::python_torch_available()) GTEST_SKIP() << "python3 with torch not installed";
  testing::TempDir dir;
  const auto [code, out] = testing::shell("python3 " PIPELAB_SOURCE_DIR "/tests/tools/torch_csv_check.py generate " +
                                          dir.path());
  ASSERT_EQ(code, 0) << out;
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("izb_", 0) != 0 || name.find(".comms") != std::string::npos) continue;
    int p = 0, v = 0, n = 0;
    ASSERT_EQ(std::sscanf(name.c_str(), "izb_%d_%d_%d.csv", &p, &v, &n), 3) << name;
    const Schedule torch = Schedule::parse_csv(testing::read_text(entry.path().string()), name);
    EXPECT_EQ(without_updates(torch), without_updates(schedules::interleaved_zero_bubble(p, v, n))) << name;
    const std::string comms = dir.file(name.substr(0, name.size() - 4) + ".comms.csv");
    EXPECT_EQ(without_updates(Schedule::parse_csv(testing::read_text(comms), comms)), without_updates(torch)) << name;
    ++compared;
  }
  EXPECT_EQ(compared, 10);
  // torch's ScheduleInterleaved1F1B, flexible counts and m == p included: pipelab's order.
  for (const auto& [p, v, n] : std::vector<std::array<int, 3>>{
           {2, 2, 2}, {2, 2, 4}, {4, 2, 4}, {4, 2, 3}, {4, 2, 6}, {4, 2, 10}, {4, 3, 8}, {3, 2, 6}}) {
    const std::string name = fmt::format("i1f1b_{}_{}_{}.csv", p, v, n);
    const Schedule torch = Schedule::parse_csv(testing::read_text(dir.file(name)), name);
    EXPECT_EQ(without_updates(torch), without_updates(schedules::interleaved_1f1b(p, v, n))) << name;
  }
  const Schedule zbv = Schedule::parse_csv(testing::read_text(dir.file("zbv_2_2_4.csv")), "zbv");
  EXPECT_EQ(without_updates(zbv), without_updates(schedules::zbv(2, 4)));
}

TEST(TorchCsv, TorchReadsWhatScheduleWrites) {
  if (!testing::python_torch_available()) GTEST_SKIP() << "python3 with torch not installed";
  testing::TempDir dir;
  for (const std::string& args : {std::string("--scheme zb_h1 --stages 8 --virtual-stages 2 --microbatches 6"),
                                  std::string("--scheme interleaved_1f1b --stages 4 --virtual-stages 2 --microbatches 4"),
                                  std::string("--scheme gpipe --stages 3 --microbatches 4")}) {
    const std::string csv = dir.file("out.csv");
    auto [code, out] = testing::shell(std::string(PIPELAB_BINARY) + " schedule " + args + " --csv " + csv);
    ASSERT_EQ(code, 0) << out;
    const Schedule ours = Schedule::parse_csv(testing::read_text(csv), csv);
    std::tie(code, out) = testing::shell("python3 " PIPELAB_SOURCE_DIR "/tests/tools/torch_csv_check.py reload " +
                                         csv + " " + std::to_string(ours.devices()));
    ASSERT_EQ(code, 0) << out;
    EXPECT_EQ(testing::read_text(csv + ".back"), testing::read_text(csv)) << args;
  }
}

}  // namespace
}  // namespace pipelab::torch_csv_test
