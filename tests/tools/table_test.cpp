// Result tables from run folders the test writes: mean ± std computed by hand, diverged
// and missing cells, published values from a reference CSV, the CSV output, and warnings.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/helpers.h"
#include "tools/report/csv.h"
#include "tools/report/table.h"

namespace pipelab::tools::table_test {
namespace {

/// Writes a run folder with the config keys the table reads and a summary.json.
void fake_run(const std::string& dir, const std::string& model, const std::string& scheme, int stages, int seed,
              const std::string& status, double acc, double lr = 0.1) {
  std::filesystem::create_directories(dir);
  testing::write_text(
      dir + "/config.yaml",
      fmt::format("pipelab: {{version: 0.1.0}}\nmodel: {{type: {}}}\npartition: {{stages: {}}}\n"
                  "scheme: {{type: {}}}\noptimizer: {{type: sgd, lr: {}}}\nrun: {{seed: {}, output: {}}}\n",
                  model, stages, scheme, lr, seed, dir));
  if (status.empty()) return;  // an interrupted run: no summary yet
  testing::write_text(
      dir + "/summary.json",
      fmt::format("{{\n  \"status\": \"{}\",\n  \"test_acc\": {{\"final\": {}, \"best\": {}, \"best_epoch\": 3}},\n"
                  "  \"samples_per_second\": 1000,\n"
                  "  \"per_stage\": [{{\"stage\": 0, \"gap\": {}}}, {{\"stage\": 1}}, {{\"stage\": 2, \"gap\": 3}}]\n}}\n",
                  status, acc, acc + 1, acc / 10));
}

/// mlp x {gpipe/2: 90, 91, 92.5; gpipe/4: 88 and a diverged seed; naive/2: 89.5}; cnn x
/// {gpipe/2: 80}; one interrupted run.
class TableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string r = dir_.path() + "/runs";
    fake_run(r + "/a0", "mlp", "gpipe", 2, 0, "finished", 90);
    fake_run(r + "/a1", "mlp", "gpipe", 2, 1, "finished", 91);
    fake_run(r + "/a2", "mlp", "gpipe", 2, 2, "finished", 92.5);
    fake_run(r + "/b0", "mlp", "gpipe", 4, 0, "finished", 88);
    fake_run(r + "/b1", "mlp", "gpipe", 4, 1, "diverged", 10);
    fake_run(r + "/c0", "mlp", "naive", 2, 0, "finished", 89.5);
    fake_run(r + "/d0", "cnn", "gpipe", 2, 0, "finished", 80);
    fake_run(r + "/e0", "cnn", "gpipe", 4, 0, "", 0);
  }
  ResultTable table(const std::string& metric = "test_acc.final") {
    TableOptions o;
    o.rows = parse_keys("model", "--rows");
    o.cols = parse_keys("scheme,stages", "--rows");
    o.metric = metric;
    return build_table(load_runs(dir_.path() + "/runs"), o);
  }
  testing::TempDir dir_;
};

TEST_F(TableTest, MeanAndSampleStdByHand) {
  const ResultTable t = table();
  EXPECT_EQ(t.row_labels, (std::vector<std::string>{"cnn", "mlp"}));
  EXPECT_EQ(t.col_labels, (std::vector<std::string>{"gpipe/2", "gpipe/4", "naive/2"}));
  const Stats s = t.cells.at({1, 0}).stats();
  // mean (90 + 91 + 92.5) / 3 = 91.1667; deviations -1.1667, -0.1667, 1.3333;
  // sum of squares 3.16667, / (n - 1) = 1.58333, sqrt = 1.25831.
  EXPECT_EQ(s.n, 3);
  EXPECT_NEAR(s.mean, 91.166666666666667, 1e-12);
  EXPECT_NEAR(s.std, 1.2583057392117916, 1e-12);
  EXPECT_EQ(t.cells.at({1, 1}).diverged, 1);
  EXPECT_EQ(t.runs, 7);
  EXPECT_EQ(t.incomplete, 1);
  const std::string md = table_markdown(t);
  EXPECT_NE(md.find("| model.type | gpipe/2 | gpipe/4 | naive/2 |\n|:--|--:|--:|--:|\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| cnn | 80.00, n=1 | – | – |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| mlp | 91.17 ± 1.26 | 88.00, n=1, 1 diverged | 89.50, n=1 |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("mean ± std over 3 runs per cell (sample std), n where fewer"), std::string::npos) << md;
  EXPECT_NE(md.find("1 run without a summary.json"), std::string::npos) << md;
}

TEST_F(TableTest, Csv) {
  const auto rows = parse_csv(table_csv(table()), "table.csv");
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"model.type", "scheme.type", "partition.stages", "n", "mean", "std",
                                               "min", "max", "diverged", "reference", "not_reached"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"cnn", "gpipe", "2", "1", "80", "", "80", "80", "0", "", "0"}));
  EXPECT_EQ(rows[2][0], "mlp");
  EXPECT_EQ(rows[2][3], "3");
  EXPECT_NEAR(std::stod(rows[2][4]), 91.166666666666667, 1e-12);
  EXPECT_NEAR(std::stod(rows[2][5]), 1.2583057392117916, 1e-12);
  EXPECT_EQ(rows[3], (std::vector<std::string>{"mlp", "gpipe", "4", "1", "88", "", "88", "88", "1", "", "0"}));
}

TEST_F(TableTest, AllDivergedAndOtherMetrics) {
  fake_run(dir_.path() + "/runs/b2", "cnn", "naive", 2, 0, "diverged", 10);
  std::string md = table_markdown(table());
  EXPECT_NE(md.find("| cnn | 80.00, n=1 | – | diverged |"), std::string::npos) << md;
  md = table_markdown(table("test_acc.best"));
  EXPECT_NE(md.find("| mlp | 92.17 ± 1.26 |"), std::string::npos) << md;
  // Through a list: the mean over the elements that have it (here (acc / 10 + 3) / 2).
  md = table_markdown(table("per_stage.gap"));
  EXPECT_NE(md.find("| cnn | 5.500, n=1 |"), std::string::npos) << md;
  md = table_markdown(table("samples_per_second"));
  EXPECT_NE(md.find("| cnn | 1000, n=1 | – | diverged |"), std::string::npos) << md;
  const std::string msg = testing::user_error([&] { table("test_accuracy"); });
  EXPECT_NE(msg.find("--metric test_accuracy: no summary.json has this number. Fix: use one of: test_acc.final"),
            std::string::npos)
      << msg;
  EXPECT_NE(testing::user_error([&] {
              TableOptions o;
              o.rows = parse_keys("modle", "--rows");
              build_table(load_runs(dir_.path() + "/runs"), o);
            })
                .find("--rows modle: no run has this key in its config.yaml. Fix: use a config key path or an alias; "
                      "closest: model"),
            std::string::npos);
}

TEST_F(TableTest, ReferenceValuesInParentheses) {
  ResultTable t = table();
  add_reference(t, "model,gpipe/2,gpipe/4,naive/4\nmlp,90.81,88.31,1\nvgg,91.1,,\n", "published.csv");
  const std::string md = table_markdown(t);
  EXPECT_NE(md.find("published values in parentheses"), std::string::npos) << md;
  EXPECT_NE(md.find("| mlp | 91.17 ± 1.26 (90.81) | 88.00, n=1, 1 diverged (88.31) | 89.50, n=1 |"), std::string::npos)
      << md;
  EXPECT_NE(table_csv(t).find("mlp,gpipe,2,3,"), std::string::npos);
  EXPECT_NE(table_csv(t).find(",0,90.81,0\n"), std::string::npos) << table_csv(t);
  // A partial sweep lacks a key that the reference's labels carry as "-" (a column key no run
  // of it has): its labels still match.
  ResultTable w = table();
  add_reference(w, "model,gpipe/2/-,gpipe/-/4\nmlp,90.81,88.31\n", "published.csv");
  EXPECT_NE(table_markdown(w).find("| mlp | 91.17 ± 1.26 (90.81) | 88.00, n=1, 1 diverged (88.31) |"), std::string::npos)
      << table_markdown(w);
  ResultTable u = table();
  EXPECT_NE(
      testing::user_error([&] {
        add_reference(u, "model,MP2\nVGG,90.81\n", "spectrain.csv");
      }).find("spectrain.csv: none of its row and column labels match the table (rows: cnn, mlp; columns: gpipe/2"),
      std::string::npos);
  EXPECT_NE(testing::user_error([&] {
              add_reference(u, "model,gpipe/2\nmlp,high\n", "bad.csv");
            }).find("bad.csv: row 2, column 'gpipe/2': 'high' is not a number"),
            std::string::npos);
  // A label twice: refused, naming both lines (one of the two rows was dropped unseen).
  EXPECT_NE(testing::user_error([&] {
              add_reference(u, "model,gpipe/2\nmlp,90\nmlp,91\n", "twice.csv");
            }).find("twice.csv: rows 2 and 3 are both labelled 'mlp'. Fix: keep one of them"),
            std::string::npos);
  EXPECT_NE(testing::user_error([&] {
              add_reference(u, "model,gpipe/2,gpipe/2\nmlp,90,91\n", "twice.csv");
            }).find("twice.csv: columns 2 and 3 are both labelled 'gpipe/2'"),
            std::string::npos);
}

TEST_F(TableTest, WarnsWhenACellMixesExperimentsAndFilters) {
  fake_run(dir_.path() + "/runs/c1", "mlp", "naive", 2, 1, "finished", 70, 0.5);
  const std::string md = table_markdown(table());
  EXPECT_NE(md.find("Note: mlp x naive/2 averages runs that differ in optimizer.lr"), std::string::npos) << md;
  TableOptions o;
  o.rows = parse_keys("model", "--rows");
  o.cols = parse_keys("scheme", "--rows");
  const ResultTable t = build_table(filter_runs(load_runs(dir_.path() + "/runs"), {"lr=0.5"}), o);
  EXPECT_EQ(t.runs, 1);
  EXPECT_EQ(t.cells.at({0, 0}).values, std::vector<double>{70});
}

TEST(Csv, QuotesRoundTrip) {
  const std::vector<std::string> fields{"plain", "a,b", "say \"hi\"", ""};
  EXPECT_EQ(csv_line(fields), "plain,\"a,b\",\"say \"\"hi\"\"\",");
  EXPECT_EQ(parse_csv(csv_line(fields) + "\r\n\nx\n", "t.csv"), (std::vector<std::vector<std::string>>{fields, {"x"}}));
  EXPECT_NE(testing::user_error([] { parse_csv("a,\"b\n", "t.csv"); }).find("t.csv:2: a quoted field never ends"),
            std::string::npos);
}

TEST(NaturalOrder, NumbersByValue) {
  std::vector<std::string> v{"gpipe/16", "gpipe/4", "naive/2", "gpipe/2", "lr=0.1", "lr=0.05"};
  std::sort(v.begin(), v.end(), natural_less);
  EXPECT_EQ(v, (std::vector<std::string>{"gpipe/2", "gpipe/4", "gpipe/16", "lr=0.05", "lr=0.1", "naive/2"}));
}

}  // namespace
}  // namespace pipelab::tools::table_test
