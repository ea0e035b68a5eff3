// init.names (core/model/tensor_names.h): rules rename a file's tensors, the first whole match
// wins, an empty rewrite drops, collisions and bad rules are clear errors, and a run started
// from a renamed file equals one started from the original.
#include <gtest/gtest.h>

#include "core/model/tensor_names.h"
#include "tests/support/helpers.h"

namespace pipelab::tensor_names_test {
namespace {

std::vector<std::string> names_of(const TensorDict& d) {
  std::vector<std::string> out;
  for (const auto& kv : d) out.push_back(kv.first);
  return out;
}

TEST(TensorNames, FirstWholeMatchRewritesAndEmptyDrops) {
  const TensorDict in{{"layer1.0.bn1.weight", at::ones(1)}, {"fc.bias", at::ones(1)},
                      {"aux.fc.weight", at::ones(1)}, {"kept", at::ones(1)}};
  const std::vector<NameRule> rules{{R"(aux\..*)", ""},
                                    {R"(layer(\d)\.(\d+)\.bn(\d)\.(.*))", R"(layer\1_\2.conv\3.bn.\4)"},
                                    {R"(fc\.(.*))", R"(head.fc.\1)"},
                                    {R"(.*\.bias)", "never"}};  // fc.bias met the rule before
  std::vector<std::string> dropped;
  const TensorDict out = rename_tensors(in, rules, "f.pt", &dropped);
  EXPECT_EQ(names_of(out), (std::vector<std::string>{"layer1_0.conv1.bn.weight", "head.fc.bias", "kept"}));
  EXPECT_EQ(dropped, std::vector<std::string>{"aux.fc.weight"});
  // A rule matches whole names only: "xfc.bias" is not "fc\..*".
  EXPECT_EQ(names_of(rename_tensors({{"xfc.bias", at::ones(1)}}, {{R"(fc\.(.*))", R"(head.\1)"}}, "f.pt")),
            std::vector<std::string>{"xfc.bias"});
  const std::string clash = testing::user_error(
      [&] { rename_tensors({{"a.w", at::ones(1)}, {"b.w", at::ones(1)}}, {{R"(.\.(w))", R"(x.\1)"}}, "f.pt"); });
  EXPECT_NE(clash.find("f.pt: init.names maps both 'a.w' and 'b.w' to 'x.w'"), std::string::npos) << clash;
  EXPECT_EQ(check_name_rule({"(a", "x"}).rfind("'(a' is not a regular expression", 0), 0u);
  EXPECT_NE(check_name_rule({"(a)", R"(\2)"}).find("rewrite '\\2'"), std::string::npos);
  // The rewrite takes the groups of the whole-name match: a lazy group still spans what the
  // whole match needs (`weight.10` is not `1.weight0`).
  EXPECT_EQ(names_of(rename_tensors({{"weight.10", at::ones(1)}, {"bias.2", at::ones(1)}},
                                    {{R"((weight|bias)\.(\d+?))", R"(\2.\1)"}}, "f.pt")),
            (std::vector<std::string>{"10.weight", "2.bias"}));
  // Linear time: the pattern that makes a backtracking engine run for ages returns at once.
  const std::string many(5000, 'a');
  EXPECT_EQ(names_of(rename_tensors({{many, at::ones(1)}}, {{"(a*)*b", "x"}}, "f.pt")), std::vector<std::string>{many});
}

const char* kMlp = R"(
model:     {type: mlp, sizes: [8, 16, 4]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [8], classes: 4}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.1}
run:       {epochs: 1, batch_size: 16, seed: 3}
)";

TEST(TensorNames, AListCombinesANamingWithRulesInItsOrder) {
  // [rules, naming, rules]: the naming's rules stand where it is listed; written back as read.
  const auto read = [](const std::string& yaml) {
    auto source = std::make_shared<ConfigSource>("demo.yaml");
    return ConfigValue<TensorNames>::read(ConfigNode(YAML::Load(yaml), source, "init.names"));
  };
  const TensorNames n = read(R"([{'fc\..*': ''}, torchvision, {'x': 'y'}])");
  EXPECT_EQ(n.preset, "torchvision");
  ASSERT_EQ(n.rules.size(), 2u);
  EXPECT_EQ(n.preset_at, 1u);
  const std::vector<NameRule> all = n.with({{"a", "b"}, {"c", "d"}});
  std::vector<std::string> order;
  for (const NameRule& r : all) order.push_back(r.pattern);
  EXPECT_EQ(order, (std::vector<std::string>{"fc\\..*", "a", "c", "x"}));
  const TensorNames back = read(YAML::Dump(ConfigValue<TensorNames>::write(n)));
  EXPECT_EQ(back.preset, "torchvision");
  EXPECT_EQ(back.preset_at, 1u);
  ASSERT_EQ(back.rules.size(), 2u);
  EXPECT_EQ(back.rules[1].rewrite, "y");
  const std::string twice = testing::user_error([&] { read("[torchvision, huggingface]"); });
  EXPECT_NE(twice.find("init.names[1]: a second naming"), std::string::npos) << twice;
  const std::string empty = testing::user_error([&] { read("[]"); });
  EXPECT_NE(empty.find("init.names: an empty list"), std::string::npos) << empty;
}

TEST(TensorNames, InitNamesInARun) {
  testing::TempDir dir;
  {
    Experiment e = testing::experiment(kMlp, dir.file("first"));
    Runner(e, {false, true}).run();
  }
  const std::string pt = dir.file("first/checkpoints/final.pt");
  TensorDict renamed;
  for (const auto& [name, t] : load_tensor_dict(pt)) renamed.emplace_back("model." + name, t);
  renamed.emplace_back("model_extra.step", at::zeros(1));
  save_tensor_dict(dir.file("renamed.pt"), renamed);
  const std::string rules = R"(init.names={'model\.(.*)': '\1', 'model_extra\..*': ''})";
  EXPECT_TRUE(testing::identical(testing::train(kMlp, {"init.from=" + pt, "run.seed=4"}),
                                 testing::train(kMlp, {"init.from=" + dir.file("renamed.pt"), rules, "run.seed=4"})));
  const std::string no_preset = testing::user_error(
      [&] { testing::train(kMlp, {"init.from=" + dir.file("renamed.pt"), "init.names=torchvision"}); });
  EXPECT_NE(no_preset.find("init.names: model mlp has no torchvision names"), std::string::npos) << no_preset;
  const std::string bad_rule = testing::user_error([&] { testing::experiment(kMlp, "", {"init.names={'(x': y}"}); });
  EXPECT_NE(bad_rule.find("init.names"), std::string::npos) << bad_rule;
  EXPECT_NE(bad_rule.find("'(x' is not a regular expression"), std::string::npos) << bad_rule;
  const std::string bad_preset = testing::user_error([&] { testing::experiment(kMlp, "", {"init.names=timm"}); });
  EXPECT_NE(bad_preset.find("'timm' is not a naming"), std::string::npos) << bad_preset;
  // Rules that drop every tensor say so, not "none of its 0 entries".
  const std::string all_dropped = testing::user_error(
      [&] { testing::train(kMlp, {"init.from=" + dir.file("renamed.pt"), "init.names={'.*': ''}"}); });
  EXPECT_NE(all_dropped.find("init.names: its rules drop every one of the 5 entries of"), std::string::npos)
      << all_dropped;
  // Integers or booleans into float weights: a file of something else, refused by name.
  TensorDict ints = load_tensor_dict(pt);
  ints[0].second = ints[0].second.to(at::kBool);
  save_tensor_dict(dir.file("ints.pt"), ints);
  const std::string wrong = testing::user_error([&] { testing::train(kMlp, {"init.from=" + dir.file("ints.pt")}); });
  EXPECT_NE(wrong.find("the model's floating-point weights would get values that are not: " + ints[0].first +
                       " (dtype Bool in the file)"),
            std::string::npos)
      << wrong;
}

}  // namespace
}  // namespace pipelab::tensor_names_test
