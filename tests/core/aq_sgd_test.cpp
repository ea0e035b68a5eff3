// AQ-SGD's quantizer and its per-example history (core/compress/fixpoint.h, aq_sgd.cpp): the
// derived oracle of docs/schemes.md, "Numbered oracles" (direct 4-bit codes, then the epochs that
// compress the change), its equivalences (the warm-up is exact; the two ends' histories stay
// bitwise equal; an identity-like quantizer is plain training), bit packing, the state a
// checkpoint keeps, and its refusals.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>

#include "core/compress/codec.h"
#include "core/compress/compression.h"
#include "core/compress/fixpoint.h"
#include "core/config/yaml_file.h"
#include "tests/support/helpers.h"

namespace pipelab::aq_sgd_test {
namespace {

std::unique_ptr<Codec> make(const std::string& yaml, int64_t examples = 1, const std::string& folder = "") {
  auto source = std::make_shared<ConfigSource>("codec.yaml");
  auto c = Registry<Codec>::get().create(ConfigNode(parse_yaml(yaml, "codec.yaml"), source, "codec"));
  c->bind({"0-1.F.t0.send", examples, folder});
  return c;
}

std::vector<int64_t> unpacked(const at::Tensor& packed, int64_t n, int bits) {
  const at::Tensor c = compress::unpack_bits(packed, n, bits).to(at::kLong);
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + n);
}

CodecCall train(const std::vector<int64_t>& ids) { return {0, false, 0, true, at::tensor(ids, at::kLong)}; }

TEST(Fixpoint, TheDerivedOracleDirect) {
  // The oracle, direct 4-bit: x = (0.75, -1, 0.25, 1.25) of shape [1, 4, 1]: s = 1.25, codes
  // (13, 2, 10, 15), x̂ = (0.78125, -0.9375, 0.3125, 1.09375) (+s decodes below s: AQ-SGD's
  // asymmetric grid, docs/schemes.md, "Quirks").
  const at::Tensor x = at::tensor({0.75, -1.0, 0.25, 1.25}, at::kDouble).reshape({1, 4, 1});
  auto c = make("{type: fixpoint, bits: 4}");
  const std::vector<at::Tensor> parts = c->encode(x, train({0}));
  EXPECT_EQ(unpacked(parts[0], 4, 4), (std::vector<int64_t>{13, 2, 10, 15}));
  EXPECT_EQ(parts[0].numel(), 2);  // 4 codes of 4 bits
  EXPECT_EQ(parts[1].scalar_type(), at::kHalf);
  EXPECT_EQ(parts[1].item<double>(), 1.25);
  const at::Tensor back = c->decode(parts, x.sizes(), at::kDouble, train({0}));
  EXPECT_TRUE(back.equal(at::tensor({0.78125, -0.9375, 0.3125, 1.09375}, at::kDouble).reshape({1, 4, 1}))) << back;
}

TEST(Fixpoint, BitsPackToTheByteAndBack) {
  for (int bits = 1; bits <= 8; ++bits) {
    const at::Tensor codes = at::randint(0, 1 << bits, {37}, at::kByte);
    const at::Tensor packed = compress::pack_bits(codes, bits);
    EXPECT_EQ(packed.numel(), (37 * bits + 7) / 8) << bits;
    EXPECT_TRUE(compress::unpack_bits(packed, 37, bits).equal(codes)) << bits;
  }
}

TEST(Fixpoint, ScalesPerLastIndexPerChannelOrPerTensor) {
  const at::Tensor x = at::randn({3, 4, 5}, at::kDouble);
  // The fixpoint quantizer's bound (docs/compression.md "Codecs"): half a step, s / 2^b,
  // inside; at the clipped top s / 2^(b-1), plus fp16's rounding of s (2^-11 relative).
  for (const auto& [dims, count] : std::vector<std::pair<std::string, int64_t>>{{"last", 5}, {"channel", 4}, {"tensor", 1}}) {
    auto c = make("{type: fixpoint, bits: 8, scale_dims: " + dims + "}");
    const std::vector<at::Tensor> parts = c->encode(x, train({0, 1, 2}));
    EXPECT_EQ(parts[1].numel(), count) << dims;
    const at::Tensor back = c->decode(parts, x.sizes(), at::kDouble, train({0, 1, 2}));
    EXPECT_LE((back - x).abs().max().item<double>(), x.abs().max().item<double>() * (1.0 / 128 + 1.0 / 2048)) << dims;
  }
}

TEST(AqSgd, TheDerivedOracleOverThreeEpochs) {
  // The oracle with one example: epoch 1 is the warm-up (exact; both ends store fp16(x)); the
  // oracle's m̂ = (0.5, -0.5, 0.25, 0.75) is what a warm-up on those values stores.
  auto sender = make("{type: aq_sgd, bits: 4}");
  auto receiver = make("{type: aq_sgd, bits: 4}");
  const at::Tensor m0 = at::tensor({0.5, -0.5, 0.25, 0.75}, at::kDouble).reshape({1, 4, 1});
  const at::Tensor x = at::tensor({0.75, -1.0, 0.25, 1.25}, at::kDouble).reshape({1, 4, 1});
  std::vector<at::Tensor> parts = sender->encode(m0, train({0}));
  EXPECT_TRUE(parts[0].equal(m0));  // exact
  EXPECT_TRUE(receiver->decode(parts, m0.sizes(), at::kDouble, train({0})).equal(m0));
  // Epoch 2: δ = (0.25, -0.5, 0, 0.5), s = 0.5, codes (12, 0, 8, 15), m̂ = (0.75, -1, 0.25, 1.1875).
  parts = sender->encode(x, train({0}));
  EXPECT_EQ(unpacked(parts[0], 4, 4), (std::vector<int64_t>{12, 0, 8, 15}));
  EXPECT_EQ(parts[1].item<double>(), 0.5);
  at::Tensor got = receiver->decode(parts, x.sizes(), at::kDouble, train({0}));
  EXPECT_TRUE(got.equal(at::tensor({0.75, -1.0, 0.25, 1.1875}, at::kDouble).reshape({1, 4, 1}))) << got;
  // Epoch 3: δ = (0, 0, 0, 0.0625): codes (8, 8, 8, 15), m̂ = (0.75, -1, 0.25, 1.2421875).
  parts = sender->encode(x, train({0}));
  EXPECT_EQ(unpacked(parts[0], 4, 4), (std::vector<int64_t>{8, 8, 8, 15}));
  EXPECT_EQ(parts[1].item<double>(), 0.0625);
  got = receiver->decode(parts, x.sizes(), at::kDouble, train({0}));
  EXPECT_TRUE(got.equal(at::tensor({0.75, -1.0, 0.25, 1.2421875}, at::kDouble).reshape({1, 4, 1}))) << got;
  // The two ends' histories are bitwise equal (equivalence 4).
  EXPECT_TRUE(sender->state().toTupleRef().elements()[0].toTensor().equal(
      receiver->state().toTupleRef().elements()[0].toTensor()));
}

TEST(AqSgd, EachExampleHasItsOwnHistoryAndBothEndsAgree) {
  auto sender = make("{type: aq_sgd, bits: 2, warmup_epochs: 2}", 10);
  auto receiver = make("{type: aq_sgd, bits: 2, warmup_epochs: 2}", 10);
  const at::Tensor base = at::randn({10, 3, 2}, at::kFloat);
  for (int epoch = 0; epoch < 5; ++epoch) {
    for (const std::vector<int64_t>& ids : {std::vector<int64_t>{3, 7, 1}, {0, 9, 5}}) {
      const at::Tensor idx = at::tensor(ids, at::kLong);
      const at::Tensor x = base.index_select(0, idx) * (1 + 0.1 * epoch);
      const std::vector<at::Tensor> parts = sender->encode(x, train(ids));
      // Two warm-up visits travel exactly; later ones as 2-bit codes.
      EXPECT_EQ(at::isFloatingType(parts[0].scalar_type()), epoch < 2) << epoch;
      const at::Tensor got = receiver->decode(parts, x.sizes(), at::kFloat, train(ids));
      if (epoch < 2) EXPECT_TRUE(got.equal(x));
    }
  }
  const auto s = sender->state().toTupleRef().elements();
  const auto r = receiver->state().toTupleRef().elements();
  EXPECT_TRUE(s[0].toTensor().equal(r[0].toTensor()));
  EXPECT_TRUE(s[1].toTensor().equal(r[1].toTensor()));
  EXPECT_EQ(s[1].toTensor()[3].item<int>(), 5);  // visits
  EXPECT_EQ(s[1].toTensor()[2].item<int>(), 0);  // never sent
  EXPECT_EQ(sender->storage_bytes(), 10 * 6 * 2 + 10 * 4);  // fp16 history + int32 visits
  // Evaluation travels exactly and moves nothing.
  const CodecCall eval{0, false, 0, false, at::tensor({3}, at::kLong)};
  const at::Tensor x = at::randn({1, 3, 2}, at::kFloat);
  EXPECT_TRUE(receiver->decode(sender->encode(x, eval), x.sizes(), at::kFloat, eval).equal(x));
  EXPECT_TRUE(sender->state().toTupleRef().elements()[0].toTensor().equal(s[0].toTensor()));
}

TEST(AqSgd, AFullPrecisionHistoryWithEightBitsTracksTheActivation) {
  // Equivalence 1: with the run's own dtype as the cache, each message moves m̂ within half a
  // step of x, and steps shrink as the change does.
  auto sender = make("{type: aq_sgd, bits: 8, cache: full}", 2);
  auto receiver = make("{type: aq_sgd, bits: 8, cache: full}", 2);
  const at::Tensor x = at::randn({2, 16}, at::kDouble);
  at::Tensor got;
  for (int t = 0; t < 4; ++t) got = receiver->decode(sender->encode(x, train({0, 1})), x.sizes(), at::kDouble, train({0, 1}));
  EXPECT_LE((got - x).abs().max().item<double>(), 1e-9);
}

TEST(AqSgd, TheStateRestoresAndTheDiskStoreMatchesMemory) {
  const testing::TempDir tmp;
  const std::string dir = tmp.file("cache");
  auto memory = make("{type: aq_sgd, bits: 4}", 6);
  auto disk = make("{type: aq_sgd, bits: 4, storage: disk}", 6, dir);
  const at::Tensor x = at::randn({2, 5}, at::kFloat);
  for (int t = 0; t < 3; ++t) {
    const auto a = memory->encode(x * t, train({4, 1}));
    const auto b = disk->encode(x * t, train({4, 1}));
    EXPECT_TRUE(a[0].equal(b[0]));
  }
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir) / "0-1.F.t0.send.bin"));
  EXPECT_EQ(std::filesystem::file_size(std::filesystem::path(dir) / "0-1.F.t0.send.bin"), 6u * 5 * 2);
  // A fresh end given the saved state codes the next message as the old one does.
  auto restored = make("{type: aq_sgd, bits: 4}", 6);
  restored->load_state(disk->state());
  EXPECT_TRUE(restored->encode(x * 5, train({1, 4}))[0].equal(memory->encode(x * 5, train({1, 4}))[0]));
}

TEST(AqSgd, ClearRefusals) {
  auto source = std::make_shared<ConfigSource>("e.yaml");
  const auto read = [&](const std::string& yaml) {
    read_compression(ConfigNode(parse_yaml(yaml, "e.yaml"), source, "compression"));
  };
  const std::string gradients = testing::user_error([&] { read("{gradients: {type: aq_sgd}}"); });
  EXPECT_NE(gradients.find("compression.gradients"), std::string::npos) << gradients;
  EXPECT_NE(gradients.find("fixpoint"), std::string::npos) << gradients;
  EXPECT_NE(testing::user_error([&] { read("{activations: {type: aq_sgd, bits: 9}}"); }).find("bits"),
            std::string::npos);
  EXPECT_NE(testing::user_error([&] { read("{activations: {type: aq_sgd, cache: fp8}}"); }).find("fp16"),
            std::string::npos);
  // Without example ids (a feed that does not know them) it cannot code.
  auto c = make("{type: aq_sgd}", 4);
  EXPECT_THROW(c->encode(at::ones({2, 3}), CodecCall{0, false, 0, true, {}}), c10::Error);
  // An id beyond the training set (AQ-SGD's history size, docs/schemes.md, "Quirks").
  EXPECT_THROW(c->encode(at::ones({1, 3}), train({4})), c10::Error);
}

}  // namespace
}  // namespace pipelab::aq_sgd_test
