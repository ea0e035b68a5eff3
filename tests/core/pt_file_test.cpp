// .pt files: our writer and reader round-trip, and they interoperate with Python's
// torch.save / torch.load(weights_only=True) when python3 with torch is installed
// (tools/setup.sh installs it; the interop tests skip with a message otherwise).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/io/pt_file.h"
#include "tests/support/helpers.h"

namespace pipelab::pt_file_test {
namespace {

TEST(PtFile, RoundTripOfNestedValues) {
  testing::TempDir dir;
  c10::impl::GenericDict inner(c10::StringType::get(), c10::AnyType::get());
  inner.insert("big", int64_t{1} << 40);
  inner.insert("negative", int64_t{-70000});
  inner.insert("pi", 3.141592653589793);
  inner.insert("flag", true);
  inner.insert("name", std::string("stage 0"));
  inner.insert("nothing", c10::IValue());
  c10::impl::GenericList list(c10::AnyType::get());
  list.push_back(at::arange(6, at::kLong).reshape({2, 3}).t());  // non-contiguous
  list.push_back(at::tensor(std::vector<int64_t>{1, 0, 1}).to(at::kBool));
  list.push_back(at::full({2}, 1.5, at::kHalf));
  list.push_back(at::full({2}, -2.25, at::kBFloat16));
  list.push_back(at::arange(4, at::kByte));
  c10::impl::GenericDict top(c10::StringType::get(), c10::AnyType::get());
  top.insert("weights", at::linspace(-1, 1, 7, at::kDouble));
  top.insert("inner", inner);
  top.insert("list", list);
  top.insert("tuple", c10::ivalue::Tuple::create({int64_t{1}, 2.5}));
  save_pt(dir.file("a.pt"), top);

  const c10::IValue back = load_pt(dir.file("a.pt"));
  const auto d = back.toGenericDict();
  EXPECT_TRUE(at::equal(d.at("weights").toTensor(), at::linspace(-1, 1, 7, at::kDouble)));
  const auto i = d.at("inner").toGenericDict();
  EXPECT_EQ(i.at("big").toInt(), int64_t{1} << 40);
  EXPECT_EQ(i.at("negative").toInt(), -70000);
  EXPECT_EQ(i.at("pi").toDouble(), 3.141592653589793);
  EXPECT_TRUE(i.at("flag").toBool());
  EXPECT_EQ(i.at("name").toStringRef(), "stage 0");
  EXPECT_TRUE(i.at("nothing").isNone());
  const auto l = d.at("list").toListRef();
  EXPECT_TRUE(at::equal(l[0].toTensor(), at::arange(6, at::kLong).reshape({2, 3}).t()));
  EXPECT_EQ(l[1].toTensor().scalar_type(), at::kBool);
  EXPECT_EQ(l[2].toTensor().scalar_type(), at::kHalf);
  EXPECT_EQ(l[3].toTensor()[1].item<float>(), -2.25f);
  EXPECT_EQ(l[4].toTensor().scalar_type(), at::kByte);
  EXPECT_EQ(d.at("tuple").toTupleRef().elements()[1].toDouble(), 2.5);
}

TEST(PtFile, IdenticalContentGivesIdenticalBytes) {
  const TensorDict t{{"a", at::ones({3})}, {"b", at::zeros({2, 2}, at::kDouble)}};
  EXPECT_EQ(encode_pt(to_ivalue(t)), encode_pt(to_ivalue(t)));
}

TEST(PtFile, BadFilesGiveClearErrors) {
  testing::TempDir dir;
  testing::write_text(dir.file("text.pt"), "not a zip file at all");
  EXPECT_NE(testing::user_error([&] { load_pt(dir.file("text.pt")); }).find("not a PyTorch .pt file"), std::string::npos);
  EXPECT_NE(testing::user_error([&] { load_pt(dir.file("missing.pt")); }).find("file not found"), std::string::npos);
  save_pt(dir.file("list.pt"), c10::IValue(int64_t{3}));
  EXPECT_NE(testing::user_error([&] { load_tensor_dict(dir.file("list.pt")); }).find("expected a dict of name -> tensor"),
            std::string::npos);
  const std::string whole = encode_pt(to_ivalue(TensorDict{{"w", at::ones({100})}}));
  testing::write_text(dir.file("cut.pt"), whole.substr(0, whole.size() / 2));
  EXPECT_NE(testing::user_error([&] { load_pt(dir.file("cut.pt")); }), "");
}

TEST(PtFile, PythonReadsOurFiles) {
  if (!testing::python_torch_available()) GTEST_SKIP() << "python3 with torch not installed";
  testing::TempDir dir;
  TensorDict state{{"fc1.weight", at::arange(6, at::kFloat).reshape({2, 3})},
                   {"fc1.bias", at::tensor({0.5, -0.5}, at::kDouble)},
                   {"bn.num_batches_tracked", at::scalar_tensor(7, at::kLong)}};
  save_tensor_dict(dir.file("ours.pt"), state);
  testing::write_text(dir.file("check.py"), R"(import sys, torch
d = torch.load(sys.argv[1], weights_only=True)
assert list(d) == ['fc1.weight', 'fc1.bias', 'bn.num_batches_tracked'], list(d)
assert d['fc1.weight'].dtype == torch.float32 and d['fc1.weight'].tolist() == [[0, 1, 2], [3, 4, 5]]
assert d['fc1.bias'].dtype == torch.float64 and d['fc1.bias'].tolist() == [0.5, -0.5]
assert d['bn.num_batches_tracked'].item() == 7 and d['bn.num_batches_tracked'].dim() == 0
m = torch.nn.Sequential()
m.add_module('fc1', torch.nn.Linear(3, 2))
m.fc1.load_state_dict({'weight': d['fc1.weight'], 'bias': d['fc1.bias'].float()})
print('python read ok')
)");
  const auto [code, out] = testing::shell("python3 " + dir.file("check.py") + " " + dir.file("ours.pt"));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("python read ok"), std::string::npos) << out;
}

TEST(PtFile, WeReadPythonFiles) {
  if (!testing::python_torch_available()) GTEST_SKIP() << "python3 with torch not installed";
  testing::TempDir dir;
  testing::write_text(dir.file("make.py"), R"(import sys, torch, collections
torch.manual_seed(0)
m = torch.nn.Sequential(collections.OrderedDict(fc=torch.nn.Linear(4, 3), bn=torch.nn.BatchNorm1d(3)))
m(torch.randn(5, 4))  # updates the running statistics
torch.save(m.state_dict(), sys.argv[1] + '/state.pt')
x = torch.arange(12, dtype=torch.float32).reshape(4, 3)[:, 1:]  # a strided view
torch.save({'x': x, 'y': torch.tensor([0, 1, 2, 1]), 'meta': {'n': 4, 'name': 'toy', 'ratio': 0.25}},
           sys.argv[1] + '/data.pt')
with open(sys.argv[1] + '/expect.txt', 'w') as f:
    sd = m.state_dict()
    f.write(' '.join(f'{k}={float(v.double().sum()):.17g}' for k, v in sd.items()))
)");
  const auto [code, out] = testing::shell("python3 " + dir.file("make.py") + " " + dir.path());
  ASSERT_EQ(code, 0) << out;
  const TensorDict state = load_tensor_dict(dir.file("state.pt"));
  std::string got;
  for (const auto& [k, v] : state) got += fmt::format("{}{}={:.17g}", got.empty() ? "" : " ", k, v.to(at::kDouble).sum().item<double>());
  EXPECT_EQ(got, testing::read_text(dir.file("expect.txt")));
  const auto d = load_pt(dir.file("data.pt")).toGenericDict();
  EXPECT_TRUE(at::equal(d.at("x").toTensor(), at::arange(12, at::kFloat).reshape({4, 3}).narrow(1, 1, 2)));
  EXPECT_EQ(d.at("y").toTensor().scalar_type(), at::kLong);
  EXPECT_EQ(d.at("meta").toGenericDict().at("name").toStringRef(), "toy");
  EXPECT_EQ(d.at("meta").toGenericDict().at("ratio").toDouble(), 0.25);
}

}  // namespace
}  // namespace pipelab::pt_file_test
