// Every JSON file a run writes (summary.json, metrics/*.jsonl) reads back through Python's
// json module, with no key twice in any object (Python would keep only the last).
#include <gtest/gtest.h>

#include <cmath>

#include "core/io/json.h"
#include "tests/support/helpers.h"

namespace pipelab::json_files_test {
namespace {

TEST(Json, ObjectsKeepOrderNestAndRefuseARepeatedKey) {
  json::Object inner;
  inner.add("final", 1.5).add("best", NAN);
  json::Object o;
  o.add("b", int64_t{2}).add("a", "x\"y").add("inner", inner).add("list", std::vector<double>{0.1, INFINITY});
  EXPECT_EQ(o.str(), R"({"b":2,"a":"x\"y","inner":{"final":1.5,"best":null},"list":[0.1,null]})");
  EXPECT_THROW(o.add("b", int64_t{3}), InternalError);
  EXPECT_EQ(json::number(0.1), "0.1");
  EXPECT_EQ(json::number(1e-300), "1e-300");
  EXPECT_EQ(json::number(NAN), "null");
}

TEST(Json, PythonReadsEveryFileARunWrites) {
  if (!testing::python_torch_available()) GTEST_SKIP() << "python3 not installed";
  testing::TempDir dir;
  const char* yaml = R"(
model:     {type: mlp, sizes: [8, 16, 3]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [8], classes: 3}
partition: {stages: 2}
scheme:    {type: pipedream}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 0, amp: fp16}
)";
  Experiment e = testing::experiment(yaml, dir.file("run"));
  Runner(e, {false, true}).run();
  testing::write_text(dir.file("check.py"), R"(import json, pathlib, sys
def no_repeats(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"repeated key in {keys}"
    return dict(pairs)
root = pathlib.Path(sys.argv[1])
files = [root / "summary.json"] + sorted((root / "metrics").glob("*.jsonl"))
for f in files:
    text = f.read_text()
    docs = [text] if f.suffix == ".json" else [l for l in text.splitlines() if l]
    for d in docs:
        json.loads(d, object_pairs_hook=no_repeats)
s = json.loads((root / "summary.json").read_text())
assert isinstance(s["stages"], int) and isinstance(s["per_stage"], list), s
print("ok", len(files))
)");
  const auto [code, out] = testing::shell("python3 " + dir.file("check.py") + " " + dir.file("run"));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("ok 3"), std::string::npos) << out;
}

}  // namespace
}  // namespace pipelab::json_files_test
