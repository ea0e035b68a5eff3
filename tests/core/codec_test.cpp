// The boundary codecs (core/compress/): the hand-derived sort-quantization oracle and its
// invariants (docs/schemes.md, "Equivalences" item 11) over random tensors, gpipe_test's fast variant and its decoder
// bug (docs/schemes.md, "Quirks") behind its flag, the plain quantizer's example (docs/compression.md
// "Codecs"), top-k and its error feedback (docs/schemes.md, "Numbered oracles"), the cast, and a message's framing
// (integer tensors untouched, bytes as the formulas say).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <numeric>
#include <random>

#include "core/compress/codec.h"
#include "core/compress/compression.h"
#include "core/config/yaml_file.h"
#include "tests/support/helpers.h"

namespace pipelab::codec_test {
namespace {

std::unique_ptr<Codec> make(const std::string& yaml) {
  auto source = std::make_shared<ConfigSource>("codec.yaml");
  return Registry<Codec>::get().create(ConfigNode(parse_yaml(yaml, "codec.yaml"), source, "codec"));
}

const CodecCall kTrain{0, false, 0, true, {}};

std::vector<int64_t> codes_of(const at::Tensor& codes) {
  const at::Tensor c = codes.to(at::kLong).reshape({-1});
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

at::Tensor roundtrip(Codec& c, const at::Tensor& x, std::vector<at::Tensor>* parts = nullptr) {
  std::vector<at::Tensor> p = c.encode(x, kTrain);
  if (parts) *parts = p;
  return c.decode(p, x.sizes(), x.scalar_type(), kTrain);
}

int64_t bytes(const std::vector<at::Tensor>& parts) {
  int64_t n = 0;
  for (const at::Tensor& t : parts) n += static_cast<int64_t>(t.nbytes());
  return n;
}

TEST(SortQuant, TheDerivedOracle) {
  // docs/schemes.md, "Numbered oracles": Q = 2, S = 1 (3 bits, unshifted).
  const at::Tensor x = at::tensor({3.0, 1.3, 2.0, 1.0, 3.5, 1.1, 2.5, 1.2}, at::kFloat);
  auto c = make("{type: sort_quant, q: 2, s: 1}");
  std::vector<at::Tensor> parts;
  const at::Tensor back = roundtrip(*c, x, &parts);
  EXPECT_EQ(codes_of(parts[0]), (std::vector<int64_t>{6, 3, 4, 0, 7, 1, 5, 2}));
  EXPECT_EQ(parts[0].scalar_type(), at::kChar);
  EXPECT_NEAR(parts[1][0][0].item<double>(), 1.0, 1e-6);
  EXPECT_NEAR(parts[1][0][1].item<double>(), 0.1, 1e-6);
  EXPECT_NEAR(parts[1][1][0].item<double>(), 2.0, 1e-6);
  EXPECT_NEAR(parts[1][1][1].item<double>(), 0.5, 1e-6);
  EXPECT_EQ(bytes(parts), 8 + 16);  // codes + side information
  EXPECT_TRUE(at::allclose(back, x, 0, 1e-6)) << back;
  // In float64 the decode returns x to rounding.
  const at::Tensor xd = at::tensor({3.0, 1.3, 2.0, 1.0, 3.5, 1.1, 2.5, 1.2}, at::kDouble);
  EXPECT_TRUE(at::allclose(roundtrip(*c, xd), xd, 0, 1e-12));
}

TEST(SortQuant, TheReferenceDecodersCodeZeroBugBehindItsFlag) {
  const at::Tensor x = at::tensor({3.0, 1.3, 2.0, 1.0, 3.5, 1.1, 2.5, 1.2}, at::kDouble);
  auto c = make("{type: sort_quant, q: 2, s: 1, reference_decoder: true}");
  const at::Tensor back = roundtrip(*c, x);
  EXPECT_EQ(back[3].item<double>(), 0.0);  // position 3 holds code 0: never written
  for (int i : {0, 1, 2, 4, 5, 6, 7}) EXPECT_NEAR(back[i].item<double>(), x[i].item<double>(), 1e-12) << i;
  // 8- and 16-bit codes are shifted, and the flag changes nothing there.
  auto eight = make("{type: sort_quant, q: 6, s: 2, reference_decoder: true}");
  auto plain = make("{type: sort_quant, q: 6, s: 2}");
  EXPECT_TRUE(roundtrip(*eight, x).equal(roundtrip(*plain, x)));
}

TEST(SortQuant, EightBitCodesAreShifted) {
  // Q = 6, S = 2: c = 64 i + q - 128, so the smallest value codes -128 and the largest +127.
  const at::Tensor x = at::arange(16, at::kDouble);
  auto c = make("{type: sort_quant, q: 6, s: 2}");
  std::vector<at::Tensor> parts;
  roundtrip(*c, x, &parts);
  const std::vector<int64_t> codes = codes_of(parts[0]);
  EXPECT_EQ(codes.front(), -128);
  EXPECT_EQ(codes.back(), 127);
  for (int g = 0; g < 4; ++g) EXPECT_EQ(codes[static_cast<size_t>(4 * g)], 64 * g - 128) << g;
  auto sixteen = make("{type: sort_quant, q: 12, s: 4}");
  roundtrip(*sixteen, at::arange(64, at::kFloat), &parts);
  EXPECT_EQ(parts[0].scalar_type(), at::kShort);
  EXPECT_EQ(codes_of(parts[0]).front(), -32768);
  EXPECT_EQ(codes_of(parts[0]).back(), 32767);
}

TEST(SortQuant, InvariantsOverRandomTensors) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const int q = std::uniform_int_distribution<int>(1, 10)(rng);
    const int s = std::uniform_int_distribution<int>(0, std::min(4, 16 - q))(rng);
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 700)(rng);
    at::Tensor x = at::randn({n}, at::kDouble) * 3;
    if (trial % 5 == 0) x = at::round(x);                 // many ties
    if (trial % 7 == 0) x.narrow(0, 0, n / 2).fill_(0.5);  // a constant run
    auto c = make(fmt::format("{{type: sort_quant, q: {}, s: {}}}", q, s));
    std::vector<at::Tensor> parts;
    const at::Tensor back = roundtrip(*c, x, &parts);
    const int64_t shift = q + s == 8 || q + s == 16 ? int64_t{1} << (q + s - 1) : 0;
    const std::vector<int64_t> codes = codes_of(parts[0]);
    const int groups = 1 << s;
    std::vector<double> lo(groups, 1e300), hi(groups, -1e300);
    std::vector<int64_t> count(groups, 0);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t g = (codes[static_cast<size_t>(k)] + shift) >> q;  // the group id from the code
      ASSERT_GE(g, 0);
      ASSERT_LT(g, groups);
      const double v = x[k].item<double>(), step = parts[1][g][1].item<double>();
      EXPECT_LE(std::abs(v - back[k].item<double>()), step / 2 + 1e-12) << "trial " << trial;
      if (step == 0) EXPECT_EQ(back[k].item<double>(), parts[1][g][0].item<double>());  // constant: its min
      lo[g] = std::min(lo[g], v);
      hi[g] = std::max(hi[g], v);
      ++count[g];
    }
    for (int g = 0; g + 1 < groups; ++g) {
      EXPECT_LE(count[g + 1], count[g]);  // near-equal: the first n mod G one larger
      EXPECT_LE(count[g] - count[groups - 1], 1);
      if (count[g] && count[g + 1]) EXPECT_LE(hi[g], lo[g + 1]) << "groups ordered";
    }
    EXPECT_EQ(bytes(parts), n * (q + s <= 8 ? 1 : 2) + groups * 2 * 8);  // "Equivalences", item 11 (float64 side)
  }
}

TEST(SortQuant, Float32HistogramsGroupAsTheSortDoes) {
  // float32 finds its groups by histograms, float64 by selection: the same ranks, so the same
  // groups (ties and -0/+0 included), up to 16 groups and beyond (selection again).
  std::mt19937 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    const int s = trial % 7;  // 1 to 64 groups
    const int q = 16 - std::max(s, 6);
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 5000)(rng);
    at::Tensor x = at::relu(at::randn({n}, at::kFloat));  // half zeros: ties across boundaries
    if (trial % 3 == 0) x = at::round(x * 4) / 4;
    if (trial % 4 == 0) x.narrow(0, 0, n / 3).fill_(-0.0);
    auto c = make(fmt::format("{{type: sort_quant, q: {}, s: {}}}", q, s));
    std::vector<at::Tensor> f32, f64;
    roundtrip(*c, x, &f32);
    roundtrip(*c, x.to(at::kDouble), &f64);
    const int64_t shift = q + s == 8 || q + s == 16 ? int64_t{1} << (q + s - 1) : 0;
    const std::vector<int64_t> a = codes_of(f32[0]), b = codes_of(f64[0]);
    for (int64_t k = 0; k < n; ++k) {
      ASSERT_EQ((a[static_cast<size_t>(k)] + shift) >> q, (b[static_cast<size_t>(k)] + shift) >> q)
          << "trial " << trial << " element " << k;
    }
  }
}

/// Sort-quantization's encode (docs/compression.md "Codecs") the plain way, in float32: a stable
/// sort, groups of near-equal count, each group's min and max by a scan, round half to even. What
/// the histogram path must give, bit for bit.
std::pair<std::vector<int64_t>, std::vector<float>> sorted_encode(const at::Tensor& x, int q, int s) {
  const int64_t n = x.numel(), groups = int64_t{1} << s, levels = (int64_t{1} << q) - 1;
  const int64_t shift = q + s == 8 || q + s == 16 ? int64_t{1} << (q + s - 1) : 0;
  const float* v = x.data_ptr<float>();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const auto value = [&](int64_t i) { return v[i] == 0 ? 0.0f : v[i]; };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return value(a) < value(b); });
  std::vector<int64_t> codes(static_cast<size_t>(n));
  std::vector<float> side;
  int64_t start = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t size = n / groups + (g < n % groups ? 1 : 0);
    float lo = 0, hi = 0;
    for (int64_t r = start; r < start + size; ++r) {
      const float u = value(order[static_cast<size_t>(r)]);
      lo = r == start ? u : std::min(lo, u);
      hi = r == start ? u : std::max(hi, u);
    }
    const float step = (hi - lo) / static_cast<float>(levels);
    side.insert(side.end(), {lo, step});
    for (int64_t r = start; r < start + size; ++r) {
      const int64_t i = order[static_cast<size_t>(r)];
      const float y = step == 0 ? 0.0f : (v[i] - lo) / step;
      codes[static_cast<size_t>(i)] = g * (levels + 1) + std::clamp<int64_t>(std::llrint(y), 0, levels) - shift;
    }
    start += size;
  }
  return {codes, side};
}

TEST(SortQuant, Float32CodesAndSideInformationAreTheSortedOnes) {
  // Every group's min, max, step and every code equal the sort path's: ties straddling a
  // boundary, a boundary at the first element of its histogram bin, -0, constant groups.
  {
    // Powers of two lie in histogram bins of their own: every boundary is the first element
    // of its bin, and the group below it ends in another bin.
    const at::Tensor x = at::tensor({8.0f, 1.0f, 64.0f, 2.0f, 16.0f, 4.0f, 32.0f, 0.5f});
    auto c = make("{type: sort_quant, q: 4, s: 2}");
    std::vector<at::Tensor> parts;
    roundtrip(*c, x, &parts);
    const auto [codes, side] = sorted_encode(x, 4, 2);
    EXPECT_EQ(codes_of(parts[0]), codes);
    EXPECT_EQ(parts[1][0][0].item<float>(), 0.5f);
    EXPECT_EQ(parts[1][0][1].item<float>(), 0.5f / 15);  // group 0 = {0.5, 1}
    EXPECT_EQ(parts[1][3][0].item<float>(), 32.0f);
  }
  {
    // Powers of two lie in histogram bins of their own: every boundary is the first element
    // of its bin, and the group below it ends in another bin.
    const at::Tensor x = at::tensor({8.0f, 1.0f, 64.0f, 2.0f, 16.0f, 4.0f, 32.0f, 0.5f});
    auto c = make("{type: sort_quant, q: 4, s: 2}");
    std::vector<at::Tensor> parts;
    roundtrip(*c, x, &parts);
    const auto [codes, side] = sorted_encode(x, 4, 2);
    EXPECT_EQ(codes_of(parts[0]), codes);
    EXPECT_EQ(parts[1][0][0].item<float>(), 0.5f);
    EXPECT_EQ(parts[1][0][1].item<float>(), 0.5f / 15);  // group 0 = {0.5, 1}
    EXPECT_EQ(parts[1][3][0].item<float>(), 32.0f);
  }
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const int s = trial % 5;
    const int q = trial % 2 ? 8 - std::min(s, 7) : 12 - s;
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 3000)(rng);
    at::Tensor x = at::relu(at::randn({n}, at::kFloat));
    if (trial % 3 == 0) x = at::round(x * 4) / 4;
    if (trial % 4 == 1) x = x * 1e-3 + 7;  // every value in a few histogram bins
    if (trial % 5 == 2) x.narrow(0, 0, n / 2).fill_(-0.0);
    auto c = make(fmt::format("{{type: sort_quant, q: {}, s: {}}}", q, s));
    std::vector<at::Tensor> parts;
    roundtrip(*c, x, &parts);
    const auto [codes, side] = sorted_encode(x, q, s);
    ASSERT_EQ(codes_of(parts[0]), codes) << "trial " << trial;
    const at::Tensor got = parts[1].reshape({-1});
    for (size_t i = 0; i < side.size(); ++i) ASSERT_EQ(got[static_cast<int64_t>(i)].item<float>(), side[i]) << trial << " " << i;
  }
}

TEST(SortQuant, TheFastVariantTakesItsBoundsFromSampleZero) {
  // Sample 0 = (1, 2, 3, 4), sample 1 = (5, 6, 7, 8), S = 1: b_0 = the 2nd smallest of
  // sample 0 = 2, b_1 = the global max; group 0 = {1, 2}, group 1 = {3, ..., 8}.
  const at::Tensor x = at::arange(1, 9, at::kDouble).reshape({2, 4});
  auto c = make("{type: sort_quant, q: 2, s: 1, fast: true}");
  std::vector<at::Tensor> parts;
  const at::Tensor back = roundtrip(*c, x, &parts);
  EXPECT_EQ(codes_of(parts[0]), (std::vector<int64_t>{0, 3, 4, 5, 5, 6, 6, 7}));
  EXPECT_NEAR(parts[1][1][1].item<double>(), 5.0 / 3, 1e-12);
  EXPECT_LE((back - x).abs().max().item<double>(), 5.0 / 6 + 1e-12);
}

TEST(Uniform, TheDerivedExample) {
  // The uniform quantizer (docs/compression.md "Codecs"):
  // x = (0.75, -1, 0.25, 1.25), 2 bits: step 0.75, levels (2, 0, 2, 3), x̂ = (0.5, -1, 0.5, 1.25).
  const at::Tensor x = at::tensor({0.75, -1.0, 0.25, 1.25}, at::kDouble);
  auto c = make("{type: uniform, bits: 2}");
  std::vector<at::Tensor> parts;
  const at::Tensor back = roundtrip(*c, x, &parts);
  EXPECT_EQ(codes_of(parts[0]), (std::vector<int64_t>{0, -2, 0, 1}));  // levels - 2^(bits-1)
  EXPECT_TRUE(back.equal(at::tensor({0.5, -1.0, 0.5, 1.25}, at::kDouble))) << back;
  EXPECT_EQ(bytes(parts), 4 + 16);
}

TEST(Topk, TheDerivedExampleAndErrorFeedback) {
  // The top-k oracle (docs/schemes.md, "Numbered oracles"): v = (0.3, -2, 0.5, 1.4, -0.1), K = 0.4, so k = 2.
  const at::Tensor v = at::tensor({0.3, -2.0, 0.5, 1.4, -0.1}, at::kFloat);
  auto plain = make("{type: topk, fraction: 0.4}");
  std::vector<at::Tensor> parts;
  EXPECT_TRUE(roundtrip(*plain, v, &parts).equal(at::tensor({0.0, -2.0, 0.0, 1.4, 0.0}, at::kFloat)));
  EXPECT_EQ(codes_of(parts[1]), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(bytes(parts), 16);  // 2 values + 2 int32 indices, against 20 bytes dense
  // EF: indices {1,3}, {1,3}, {1,2} (1.5 sent at 2); the error left: (0.9, 0, 0, 1.4, -0.3).
  auto ef = make("{type: topk, fraction: 0.4, error_feedback: ef}");
  const at::Tensor vd = v.to(at::kDouble);
  std::vector<std::vector<int64_t>> sent;
  at::Tensor last;
  for (int t = 0; t < 3; ++t) {
    std::vector<at::Tensor> p = ef->encode(vd, kTrain);
    sent.push_back(codes_of(p[1]));
    last = p[0];
  }
  EXPECT_EQ(sent, (std::vector<std::vector<int64_t>>{{1, 3}, {1, 3}, {1, 2}}));
  EXPECT_NEAR(last[1].item<double>(), 1.5, 1e-12);
  // The next send is TopK(e + v) with e = (0.9, 0, 0, 1.4, -0.3): (1.2, -2, 0.5, 2.8, -0.4).
  EXPECT_EQ(codes_of(ef->encode(vd, kTrain)[1]), (std::vector<int64_t>{1, 3}));
  // EF21, both ends: the receiver's estimates (0, -2, 0, 1.4, 0), then (0.3, -2, 0.5, 1.4, 0).
  auto sender = make("{type: topk, fraction: 0.4, error_feedback: ef21}");
  auto receiver = sender->copy();
  const at::Tensor first = receiver->decode(sender->encode(vd, kTrain), vd.sizes(), at::kDouble, kTrain);
  const at::Tensor second = receiver->decode(sender->encode(vd, kTrain), vd.sizes(), at::kDouble, kTrain);
  EXPECT_TRUE(at::allclose(first, at::tensor({0.0, -2.0, 0.0, 1.4, 0.0}, at::kDouble)));
  EXPECT_TRUE(at::allclose(second, at::tensor({0.3, -2.0, 0.5, 1.4, 0.0}, at::kDouble)));
  // Evaluation leaves the state alone.
  const CodecCall eval{0, false, 0, false, {}};
  EXPECT_TRUE(receiver->decode(sender->encode(vd, eval), vd.sizes(), at::kDouble, eval).equal(
      roundtrip(*plain, v).to(at::kDouble)));
}

TEST(Cast, TwoBytesAnElement) {
  const at::Tensor x = at::randn({3, 5}, at::kFloat);
  auto c = make("{type: cast, dtype: bf16}");
  std::vector<at::Tensor> parts;
  const at::Tensor back = roundtrip(*c, x, &parts);
  EXPECT_EQ(bytes(parts), 30);
  EXPECT_TRUE(back.equal(x.to(at::kBFloat16).to(at::kFloat)));
  EXPECT_EQ(back.scalar_type(), at::kFloat);
}

TEST(Codecs, HalfPrecisionMessagesAreCodedAsTheirFloat32Values) {
  // run.amp sends bf16 or fp16 activations: every codec takes them. The ones with kernels of
  // their own decode a message as its exact float32 widening, back in its own dtype; fixpoint
  // computes in the message's dtype with tensor operations, as AC-SGD's code does.
  const at::Tensor x32 = at::randn({4, 6}, at::TensorOptions().dtype(at::kFloat).device(at::kCPU)) * 3;
  for (const at::ScalarType half : {at::kBFloat16, at::kHalf}) {
    const at::Tensor x = x32.to(half);
    for (const std::string& yaml : {"{type: uniform, bits: 4}", "{type: sort_quant, q: 4, s: 2}", "{type: topk, fraction: 0.3}",
                                    "{type: topk, fraction: 0.3, error_feedback: ef}", "{type: fixpoint, bits: 8}",
                                    "{type: cast, dtype: bf16}"}) {
      auto c = make(yaml);
      const at::Tensor back = roundtrip(*c, x);
      EXPECT_EQ(back.scalar_type(), half) << yaml;
      EXPECT_TRUE(back.isfinite().all().item<bool>()) << yaml;
      if (yaml.find("fixpoint") != std::string::npos) continue;
      const at::Tensor wide = roundtrip(*make(yaml), x.to(at::kFloat)).to(half);
      EXPECT_TRUE(back.equal(wide)) << yaml << " " << c10::toString(half);
    }
  }
}

TEST(Codecs, BadOptionsAreClearErrors) {
  EXPECT_NE(testing::user_error([] { make("{type: sort_quant, q: 12, s: 6}"); }).find("codec.q"), std::string::npos);
  EXPECT_NE(testing::user_error([] { make("{type: topk, fraction: 0}"); }).find("fraction"), std::string::npos);
  EXPECT_NE(testing::user_error([] { make("{type: sortquant}"); }).find("sort_quant"), std::string::npos);
  EXPECT_NE(testing::user_error([] { make("{type: cast, dtype: fp8}"); }).find("bf16"), std::string::npos);
}

TEST(Compression, AMessagesFloatsAreEncodedItsIntegersAndHolesTravelAsTheyAre) {
  auto source = std::make_shared<ConfigSource>("e.yaml");
  const CompressionSection section = read_compression(
      ConfigNode(parse_yaml("{activations: {type: sort_quant, q: 6, s: 2}, boundaries: [1]}", "e.yaml"), source,
                 "compression"));
  BoundaryCodecs codecs(section, 3, [](int stage) { return stage; });
  Message m;
  const at::Tensor x = at::randn({4, 6}, at::kFloat);
  const at::Tensor mask = at::ones({4, 6}, at::kLong);
  m.values = {x, mask, at::Tensor()};
  // Boundary 0 is not listed: untouched.
  EXPECT_EQ(codecs.encode(0, 1, 'F', 0, true, m).values.size(), 3u);
  const Message sent = codecs.encode(1, 2, 'F', 0, true, m);
  ASSERT_EQ(sent.values.size(), 3u + 2 + 1);  // [meta, codes, side], [meta, mask], [hole]
  EXPECT_EQ(sent.bytes(), 24 * 1 + 4 * 8 + mask.nbytes());  // "Equivalences", item 11, for x; the mask whole
  const Message got = codecs.decode(1, 2, 'F', 0, true, sent);
  ASSERT_EQ(got.values.size(), 3u);
  EXPECT_TRUE(got.values[1].equal(mask));
  EXPECT_FALSE(got.values[2].defined());
  EXPECT_EQ(got.values[0].sizes(), x.sizes());
  EXPECT_LE((got.values[0] - x).abs().max().item<double>(), 0.5 * (x.max() - x.min()).item<double>() / 63 + 1e-6);
  // Gradients have no codec here: they travel as they are.
  EXPECT_EQ(codecs.encode(2, 1, 'B', 0, true, m).values.size(), 3u);
}

TEST(Compression, BadSectionsAreClearErrors) {
  const auto read = [](const std::string& yaml) {
    auto source = std::make_shared<ConfigSource>("e.yaml");
    read_compression(ConfigNode(parse_yaml(yaml, "e.yaml"), source, "compression"));
  };
  EXPECT_NE(testing::user_error([&] { read("{boundaries: all}"); }).find("compresses nothing"), std::string::npos);
  EXPECT_NE(testing::user_error([&] { read("{activations: {type: cast}, boundaries: some}"); }).find("client_server"),
            std::string::npos);
  EXPECT_NE(testing::user_error([&] { read("{activations: {type: cast}, boundaries: [-1]}"); }).find("boundary"),
            std::string::npos);
  EXPECT_NE(testing::user_error([&] { read("{activation: {type: cast}}"); }).find("unknown key 'activation'"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab::codec_test
