// Nice ticks (1/2/5 x 10^k) and the structure of the SVG charts: parsed as XML, it has an
// <svg> root, both axes, tick labels at nice values, one polyline per run or group, bands,
// and a legend entry per line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "core/util/names.h"
#include "tests/support/helpers.h"
#include "tools/report/curves.h"
#include "tools/report/ticks.h"

namespace pipelab::tools::svg_plot_test {
namespace {

/// A parsed XML element (enough of XML for the SVG we write: elements, attributes, text).
struct Element {
  std::string name, text;
  std::map<std::string, std::string> attrs;
  std::vector<Element> children;
};

class XmlParser {
 public:
  explicit XmlParser(const std::string& s) : s_(s) {}
  Element document() {
    skip_space();
    Element root = element();
    skip_space();
    EXPECT_EQ(pos_, s_.size()) << "trailing content";
    return root;
  }

 private:
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  std::string name() {
    const size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '-' || s_[pos_] == ':'))
      ++pos_;
    return s_.substr(start, pos_ - start);
  }
  Element element() {
    Element e;
    if (s_[pos_] != '<') throw std::runtime_error("expected < at " + std::to_string(pos_));
    ++pos_;
    e.name = name();
    for (;;) {
      skip_space();
      if (s_.compare(pos_, 2, "/>") == 0) {
        pos_ += 2;
        return e;
      }
      if (s_[pos_] == '>') break;
      const std::string key = name();
      if (s_.compare(pos_, 2, "=\"") != 0) throw std::runtime_error("bad attribute " + key);
      const size_t end = s_.find('"', pos_ + 2);
      e.attrs[key] = s_.substr(pos_ + 2, end - pos_ - 2);
      pos_ = end + 1;
    }
    ++pos_;
    for (;;) {
      const size_t lt = s_.find('<', pos_);
      e.text += s_.substr(pos_, lt - pos_);
      pos_ = lt;
      if (s_.compare(pos_, 2, "</") == 0) {
        pos_ += 2;
        if (name() != e.name) throw std::runtime_error("mismatched end tag of " + e.name);
        ++pos_;
        return e;
      }
      e.children.push_back(element());
    }
  }
  const std::string& s_;
  size_t pos_ = 0;
};

/// Every element below `e` (depth first) with attribute class = `cls` (or any, if empty) and tag `tag`.
void collect(const Element& e, const std::string& tag, const std::string& cls, std::vector<const Element*>& out) {
  for (const Element& c : e.children) {
    const auto it = c.attrs.find("class");
    if (c.name == tag && (cls.empty() || (it != c.attrs.end() && it->second == cls))) out.push_back(&c);
    collect(c, tag, cls, out);
  }
}
std::vector<const Element*> all(const Element& root, const std::string& tag, const std::string& cls = "") {
  std::vector<const Element*> out;
  collect(root, tag, cls, out);
  return out;
}

/// True when v is k x {1, 2, 5} x 10^n for the chart's step: a multiple of a nice step.
bool nice_multiple(double v, double step) { return std::fabs(v / step - std::round(v / step)) < 1e-9; }
bool nice_step(double step) {
  const double f = step / std::pow(10.0, std::floor(std::log10(step) + 1e-12));
  return std::fabs(f - 1) < 1e-9 || std::fabs(f - 2) < 1e-9 || std::fabs(f - 5) < 1e-9;
}

TEST(Ticks, NiceValues) {
  Ticks t = nice_ticks(0, 83.4);
  EXPECT_EQ(t.values, (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0", "20", "40", "60", "80", "100"}));
  t = nice_ticks(0.5349, 0.8664);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.5", "0.6", "0.7", "0.8", "0.9"}));
  EXPECT_DOUBLE_EQ(t.step, 0.1);
  t = nice_ticks(1, 12, 8, true);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0", "2", "4", "6", "8", "10", "12"}));
  t = nice_ticks(1, 2, 8, true);  // two epochs: no half epochs
  EXPECT_EQ(t.labels, (std::vector<std::string>{"1", "2"}));
  t = nice_ticks(-0.013, 0.021);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"-0.02", "-0.01", "0.00", "0.01", "0.02", "0.03"}));
  t = nice_ticks(5, 5);  // one value: widened around it
  EXPECT_LT(t.lo, 5);
  EXPECT_GT(t.hi, 5);
  // Huge and tiny values: exponent labels with the digits the step needs, not 300 digits.
  t = nice_ticks(-1e300, 1e300);
  EXPECT_EQ(t.labels.front(), "-1e+300");
  for (const std::string& label : t.labels) EXPECT_LE(label.size(), 8u) << label;
  t = nice_ticks(1.5e-7, 3.2e-7);
  EXPECT_EQ(t.labels.front(), "1.5e-07");
  EXPECT_EQ(nice_number(3.2, false), 5);
  EXPECT_EQ(nice_number(3.2, true), 5);
  EXPECT_EQ(nice_number(2.9, true), 2);
  EXPECT_DOUBLE_EQ(nice_number(0.07, false), 0.1);
}

/// Writes metrics/epochs.csv (and a config) for a run with the given test accuracies.
void fake_curve(const std::string& dir, const std::string& scheme, int seed, const std::vector<std::string>& acc) {
  std::filesystem::create_directories(dir + "/metrics");
  testing::write_text(dir + "/config.yaml", fmt::format("scheme: {{type: {}}}\nrun: {{seed: {}}}\n", scheme, seed));
  std::string csv = "epoch,test_acc,seconds\n";
  for (size_t i = 0; i < acc.size(); ++i) csv += fmt::format("{},{},2.5\n", i + 1, acc[i]);
  testing::write_text(dir + "/metrics/epochs.csv", csv);
}

class PlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_curve(dir_.file("runs/g0"), "gpipe", 0, {"50", "70", "80"});
    fake_curve(dir_.file("runs/g1"), "gpipe", 1, {"54", "72", "84"});
    fake_curve(dir_.file("runs/n0"), "naive", 0, {"40", "null"});  // diverged in epoch 2
  }
  Element chart(const CurveOptions& o) {
    svg_ = render_svg(build_curves(load_runs(dir_.file("runs")), o));
    return XmlParser(svg_).document();
  }
  testing::TempDir dir_;
  std::string svg_;
};

TEST_F(PlotTest, OneLinePerRunWithAxesTicksAndLegend) {
  const Element svg = chart({});
  EXPECT_EQ(svg.name, "svg");
  EXPECT_EQ(svg.attrs.at("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(all(svg, "line", "x-axis").size(), 1u);
  EXPECT_EQ(all(svg, "line", "y-axis").size(), 1u);
  for (const char* axis : {"x-tick", "y-tick"}) {
    const auto ticks = all(svg, "text", axis);
    ASSERT_GE(ticks.size(), 3u) << axis;
    const double step = std::stod(ticks[1]->text) - std::stod(ticks[0]->text);
    EXPECT_TRUE(nice_step(step)) << axis << " step " << step;
    for (const Element* t : ticks) EXPECT_TRUE(nice_multiple(std::stod(t->text), step)) << t->text;
  }
  EXPECT_EQ(all(svg, "text", "x-tick").front()->text, "1");  // epochs 1..3, whole numbers
  EXPECT_EQ(all(svg, "text", "y-tick").back()->text, "90");  // 40..84 -> 40, 50, ..., 90
  const auto lines = all(svg, "polyline", "series");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]->attrs.at("data-label"), "g0");
  EXPECT_EQ(std::count(lines[0]->attrs.at("points").begin(), lines[0]->attrs.at("points").end(), ','), 3);
  EXPECT_EQ(std::count(lines[2]->attrs.at("points").begin(), lines[2]->attrs.at("points").end(), ','),
            1);  // null left out
  const auto legend = all(svg, "g", "legend-entry");
  ASSERT_EQ(legend.size(), 3u);
  EXPECT_EQ(legend[2]->children.back().text, "n0");
  EXPECT_EQ(all(svg, "text", "x-label").at(0)->text, "epoch");
  EXPECT_EQ(all(svg, "text", "y-label").at(0)->text, "test accuracy (%)");
  // Series that could lie on top of each other differ in dash pattern too.
  EXPECT_EQ(lines[0]->attrs.count("stroke-dasharray"), 0u);
  EXPECT_NE(lines[1]->attrs.at("stroke-dasharray"), "");
}

TEST_F(PlotTest, TextAndNonFiniteValuesAreNamedNotDrawnSilently) {
  fake_curve(dir_.file("runs/t0"), "gpipe", 2, {"50", "abc"});
  const LineChart c = build_curves(load_runs(dir_.file("runs")), {});
  const std::string notes = "\n" + join(c.notes, "\n");
  EXPECT_NE(notes.find("\nleft out t0: " + dir_.file("runs/t0/metrics/epochs.csv") + ": row 3: test_acc 'abc' is not a number"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("\nn0: 1 of 2 values of test_acc are not finite"), std::string::npos) << notes;
  EXPECT_EQ(c.series.size(), 3u);
}

TEST_F(PlotTest, TrainingCurvesByStepFromStepsCsv) {
  // A one-epoch run: its epochs.csv has one row, its steps.csv every step's loss.
  testing::write_text(dir_.file("runs/g0/metrics/steps.csv"), "step,epoch,loss,lr\n0,1,2.3,0.1\n1,1,1.9,0.1\n2,1,1.4,0.1\n");
  testing::write_text(dir_.file("runs/g1/metrics/steps.csv"), "step,epoch,loss,lr\n0,1,2.2,0.1\n1,1,1.7,0.1\n");
  CurveOptions o;
  o.x = "step";
  o.metric = "train_loss";  // steps.csv calls it loss
  const Element svg = chart(o);
  const auto lines = all(svg, "polyline", "series");
  ASSERT_EQ(lines.size(), 2u);  // n0 has no steps.csv: left out, with a note
  EXPECT_EQ(std::count(lines[0]->attrs.at("points").begin(), lines[0]->attrs.at("points").end(), ','), 3);
  EXPECT_EQ(all(svg, "text", "x-label").at(0)->text, "training step");
  EXPECT_EQ(all(svg, "text", "y-label").at(0)->text, "training loss");
  o.group_by = {"scheme"};
  const Element grouped = chart(o);
  const auto mean = all(grouped, "polyline", "series");
  ASSERT_EQ(mean.size(), 1u);  // gpipe: the mean over the runs that reached each step
  EXPECT_EQ(std::count(mean[0]->attrs.at("points").begin(), mean[0]->attrs.at("points").end(), ','), 3);
}

TEST_F(PlotTest, BaselineAndABandWithoutGroups) {
  CurveOptions o;
  o.band = true;
  o.baseline = "n0";
  const LineChart c = build_curves(load_runs(dir_.file("runs")), o);
  ASSERT_EQ(c.series.size(), 1u);  // every run in one group
  EXPECT_EQ(c.series[0].label, "all runs (n=3)");
  EXPECT_FALSE(c.series[0].lo.empty());
  ASSERT_EQ(c.references.size(), 1u);
  EXPECT_EQ(c.references[0].y, 40);  // n0's last epoch
  svg_ = render_svg(c);
  const Element svg = XmlParser(svg_).document();
  EXPECT_EQ(all(svg, "g", "reference").size(), 1u);
  EXPECT_EQ(all(svg, "g", "legend-entry").size(), 2u);
  o.baseline = "nope";
  EXPECT_NE(testing::user_error([&] { build_curves(load_runs(dir_.file("runs")), o); }).find("--baseline nope: no such run"),
            std::string::npos);
}

TEST_F(PlotTest, GroupMeansWithBandsAndTime) {
  CurveOptions o;
  o.group_by = parse_keys("scheme", "--rows");
  o.band = true;
  o.x = "time";
  const Element svg = chart(o);
  const auto lines = all(svg, "polyline", "series");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]->attrs.at("data-label"), "scheme.type=gpipe (n=2)");
  {
    // A key a run's config lacks is left out of its label; lacking all: "(not set)".
    fake_curve(dir_.file("sections/plain"), "gpipe", 0, {"50"});
    fake_curve(dir_.file("sections/cast"), "gpipe", 0, {"50"});
    testing::write_text(dir_.file("sections/cast/config.yaml"),
                        "scheme: {type: gpipe}\nrun: {seed: 0}\ncompression: {activations: {type: cast}}\n");
    CurveOptions absent;
    absent.group_by = parse_keys("compression.activations.type", "--group-by");
    const LineChart c = build_curves(load_runs(dir_.file("sections")), absent);
    ASSERT_EQ(c.series.size(), 2u);
    EXPECT_EQ(c.series[0].label, "(not set) (n=1)");
    EXPECT_EQ(c.series[1].label, "compression.activations.type=cast (n=1)");
  }
  EXPECT_EQ(all(svg, "polygon", "band").size(), 2u);
  EXPECT_EQ(all(svg, "g", "legend-entry").size(), 2u);
  EXPECT_EQ(all(svg, "text", "x-label").at(0)->text, "training and evaluation time (s)");
  // Cumulative time 2.5, 5, 7.5 s: the x ticks run from 2 to 8.
  const auto xt = all(svg, "text", "x-tick");
  EXPECT_EQ(xt.front()->text, "2");
  EXPECT_EQ(xt.back()->text, "8");
  // The group mean of epoch 2 is (70 + 72) / 2 = 71: its y sits between 70's and 72's.
  const LineChart c = build_curves(load_runs(dir_.file("runs")), o);
  EXPECT_EQ(c.series[0].y, (std::vector<double>{52, 71, 82}));
  EXPECT_EQ(c.series[0].lo, (std::vector<double>{50, 70, 80}));
  EXPECT_EQ(c.series[0].hi, (std::vector<double>{54, 72, 84}));
  EXPECT_EQ(c.series[0].x, (std::vector<double>{2.5, 5, 7.5}));
  EXPECT_EQ(c.series[1].y, (std::vector<double>{40}));
}

TEST_F(PlotTest, MistakesAreUserErrors) {
  CurveOptions o;
  o.metric = "test_accuracy";
  EXPECT_NE(testing::user_error([&] { build_curves(load_runs(dir_.file("runs")), o); })
                .find("--metric test_accuracy: " + dir_.file("runs/g0/metrics/epochs.csv") +
                      " has no such column. Fix: use one of: test_acc"),
            std::string::npos);
  o = {};
  o.x = "steps";
  EXPECT_NE(testing::user_error([&] {
              build_curves(load_runs(dir_.file("runs")), o);
            }).find("--x steps: expected epoch, time, simulated_time or step"),
            std::string::npos);
  EXPECT_NE(testing::user_error([&] { load_runs(dir_.file("nothing")); }).find("no such folder"), std::string::npos);
}

}  // namespace
}  // namespace pipelab::tools::svg_plot_test
