// The safetensors reader and writer (core/io/safetensors.h): round trips of every dtype,
// each class of hostile header as one clear error, the safetensors library reading what
// pipelab writes and the other way round, and `init.from` with a .safetensors file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/io/safetensors.h"
#include "tests/support/helpers.h"

namespace pipelab::safetensors_test {
namespace {

/// A file of `header` (JSON text) and `data`, with its 8-byte length.
std::string file(const std::string& header, const std::string& data = "") {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string error_of(const std::string& bytes) {
  return testing::user_error([&] { decode_safetensors(bytes, "w.safetensors"); });
}

TEST(Safetensors, EveryDtypeRoundTripsBitForBit) {
  TensorDict in;
  for (const auto t : {at::kDouble, at::kFloat, at::kHalf, at::kBFloat16, at::kLong, at::kInt, at::kShort, at::kChar,
                       at::kByte, at::kBool}) {
    in.emplace_back(std::string("t_") + c10::toString(t), (at::randn({2, 3}, at::kDouble) * 50).to(t));
  }
  in.emplace_back("scalar", at::scalar_tensor(1.5));
  in.emplace_back("empty", at::zeros({0, 4}));
  in.emplace_back("strided", at::arange(12, at::kFloat).view({3, 4}).t());  // written contiguous
  const std::string bytes = encode_safetensors(in, {{"format", "pt"}});
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);  // little-endian, as this machine
  EXPECT_EQ(header % 8, 0u) << "the data starts 8-byte aligned";
  const TensorDict out = decode_safetensors(bytes, "t");
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_EQ(out[i].second.scalar_type(), in[i].second.scalar_type()) << in[i].first;
    EXPECT_TRUE(out[i].second.equal(in[i].second.contiguous())) << in[i].first;
  }
  EXPECT_EQ(encode_safetensors(out, {{"format", "pt"}}), bytes);
  const std::string reused = testing::user_error([] { encode_safetensors({{"a", at::ones(1)}, {"a", at::ones(1)}}); });
  EXPECT_NE(reused.find("'a' is used twice"), std::string::npos) << reused;
  const std::string complex = testing::user_error([] { encode_safetensors({{"c", at::ones(1, at::kComplexFloat)}}); });
  EXPECT_NE(complex.find("which the format lacks"), std::string::npos) << complex;
}

TEST(Safetensors, HostileFilesAreOneClearError) {
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_NO_THROW(decode_safetensors(file(ok, std::string(8, '\0')), "w"));
  const std::vector<std::pair<std::string, std::string>> cases{
      {std::string("\x05\0\0", 3), "shorter than the header's 8-byte length"},
      {std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8), "over the limit of 100000000"},
      {file(ok).substr(0, 20), "but 12 follow"},
      {file(" " + ok, std::string(8, '\0')), "does not start with '{'"},
      {file(R"({"w":)"), "not a JSON object"},
      {file(R"({"w":{"dtype":"F32","shape":[[[[1]]]],"data_offsets":[0,4]}})"), "nests deeper"},
      {file(R"({"w":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0')), "dtype \"C64\""},
      {file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0')),
       "size 0 is not a non-negative integer"},
      {file(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", std::string(4, '\0')),
       "shape is too large"},
      {file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(4, '\0')),
       "lies at bytes [0, 8) of a data buffer of 4 bytes"},
      {file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", std::string(4, '\0')),
       "spans 4 bytes, but its dtype and shape make 8"},
      {file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0')),
       "starts at byte 4 of the data, where the one before it ends at 0 (a gap)"},
      {file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            std::string(8, '\0')),
       "(they overlap)"},
      {file(ok, std::string(12, '\0')), "the tensors end at byte 8 of a data buffer of 12 bytes"},
      {file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", std::string(8, '\0')),
       "unknown key 'x'"},
      {file(R"({"w":{"dtype":"F32","shape":[2]}})"), "lacks one of dtype, shape, data_offsets"},
      {file(R"({"__metadata__":{"k":1}})"), "__metadata__ 'k' is not a string"},
  };
  for (const auto& [bytes, want] : cases) {
    const std::string e = error_of(bytes);
    EXPECT_NE(e.find("w.safetensors: "), std::string::npos) << e;
    EXPECT_NE(e.find(want), std::string::npos) << "want '" << want << "' in: " << e;
    EXPECT_NE(e.find("Fix: "), std::string::npos) << e;
  }
}

bool python_safetensors_available() {
  return testing::python_torch_available() &&
         testing::shell("python3 -c 'import safetensors.torch' >/dev/null 2>&1").first == 0;
}

TEST(Safetensors, TheSafetensorsLibraryReadsAndWritesTheSameFiles) {
  if (!python_safetensors_available()) GTEST_SKIP() << "Python's torch or safetensors is not installed";
  testing::TempDir dir;
  const TensorDict mine{{"a.weight", at::arange(6, at::kFloat).view({2, 3})},
                        {"a.bias", at::tensor({-0.0, 2.5}).to(at::kBFloat16)},
                        {"n", at::scalar_tensor(7, at::kLong)}};
  save_safetensors(dir.file("mine.safetensors"), mine, {{"format", "pt"}});
  const std::string script = R"(
import sys, torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
assert torch.equal(t["a.weight"], torch.arange(6, dtype=torch.float32).view(2, 3)), t
assert t["a.bias"].dtype == torch.bfloat16 and t["a.bias"].tolist() == [-0.0, 2.5], t
assert t["n"].shape == () and t["n"].item() == 7, t
with safe_open(sys.argv[1], "pt") as f:
    assert f.metadata() == {"format": "pt"}, f.metadata()
torch.manual_seed(0)
lin = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
save_file(dict(lin.state_dict()), sys.argv[2], metadata={"format": "pt"})
torch.save(lin.state_dict(), sys.argv[3])
)";
  testing::write_text(dir.file("check.py"), script);
  const auto [rc, out] = testing::shell("python3 " + dir.file("check.py") + " " + dir.file("mine.safetensors") + " " +
                                        dir.file("theirs.safetensors") + " " + dir.file("theirs.pt") + " 2>&1");
  ASSERT_EQ(rc, 0) << out;
  TensorDict theirs = load_weights(dir.file("theirs.safetensors"));
  TensorDict pt = load_weights(dir.file("theirs.pt"));
  const auto by_name = [](TensorDict d) {
    std::sort(d.begin(), d.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    return d;
  };
  EXPECT_TRUE(testing::identical(by_name(theirs), by_name(pt)));
  EXPECT_EQ(theirs.size(), 7u);  // two weights, two biases, running mean and var, num_batches_tracked
}

TEST(Safetensors, InitFromASafetensorsFileIsInitFromItsPt) {
  const char* yaml = R"(
model:     {type: mlp, sizes: [8, 16, 4]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [8], classes: 4}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.1}
run:       {epochs: 1, batch_size: 16, seed: 3}
)";
  testing::TempDir dir;
  {
    Experiment e = testing::experiment(yaml, dir.file("first"));
    Runner(e, {false, true}).run();
  }
  const std::string pt = dir.file("first/checkpoints/final.pt");
  {
    // run.checkpoint_format: safetensors writes the same weights as a .safetensors file.
    Experiment e = testing::experiment(yaml, dir.file("second"), {"run.checkpoint_format=safetensors"});
    Runner(e, {false, true}).run();
    EXPECT_FALSE(std::filesystem::exists(dir.file("second/checkpoints/final.pt")));
    EXPECT_TRUE(testing::identical(load_weights(dir.file("second/checkpoints/final.safetensors")), load_weights(pt)));
  }
  save_safetensors(dir.file("final.safetensors"), load_tensor_dict(pt));
  const TensorDict from_pt = testing::train(yaml, {"init.from=" + pt, "run.seed=4"});
  const TensorDict from_st = testing::train(yaml, {"init.from=" + dir.file("final.safetensors"), "run.seed=4"});
  EXPECT_TRUE(testing::identical(from_pt, from_st));
  const std::string bad = testing::user_error([&] {
    testing::write_text(dir.file("bad.safetensors"), "not a file");
    testing::train(yaml, {"init.from=" + dir.file("bad.safetensors")});
  });
  EXPECT_NE(bad.find("bad.safetensors"), std::string::npos) << bad;
}

}  // namespace
}  // namespace pipelab::safetensors_test
