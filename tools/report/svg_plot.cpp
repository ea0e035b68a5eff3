#include "tools/report/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tools/report/ticks.h"

namespace pipelab::tools {
namespace {

// Layout in SVG user units (pixels at 100%).
constexpr double kPlotWidth = 560, kPlotHeight = 360;
constexpr double kLeft = 70, kTop = 40, kBottom = kTop + kPlotHeight, kRight = kLeft + kPlotWidth;
constexpr double kLegendGap = 24, kLegendLine = 18;
constexpr double kCharWidth = 7;  // a rough width of a 12px sans-serif character, for the legend's size
constexpr size_t kMaxDots = 40;   // series with more points get no dots

/// Matplotlib's "tab10" colours: distinct, and readable by most colour-blind people.
const char* colour(size_t i) {
  static const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return kPalette[i % 10];
}

bool finite_point(const Series& s, size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); }

std::string num(double v) { return fmt::format("{:.2f}", v); }

std::string line(double x1, double y1, double x2, double y2, const std::string& attrs = "") {
  return fmt::format("<line{} x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", attrs.empty() ? "" : " " + attrs, num(x1),
                     num(y1), num(x2), num(y2));
}

/// The axes' ticks and the mapping from data to pixels.
struct Frame {
  Ticks x, y;
  double px(double v) const { return kLeft + (v - x.lo) / (x.hi - x.lo) * kPlotWidth; }
  double py(double v) const { return kTop + (1 - (v - y.lo) / (y.hi - y.lo)) * kPlotHeight; }
  std::string point(double vx, double vy) const { return num(px(vx)) + "," + num(py(vy)); }
};

/// Ticks covering every finite point and band of the chart.
Frame frame_of(const LineChart& chart) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const Series& s : chart.series) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!finite_point(s, i)) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min({y0, s.y[i], s.lo.empty() ? s.y[i] : s.lo[i]});
      y1 = std::max({y1, s.y[i], s.hi.empty() ? s.y[i] : s.hi[i]});
    }
  }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;  // nothing to draw: empty axes
  for (const Reference& r : chart.references) {
    if (std::isfinite(r.y)) y0 = std::min(y0, r.y), y1 = std::max(y1, r.y);
  }
  return {nice_ticks(x0, x1, 8, chart.integer_x), nice_ticks(y0, y1, 6)};
}

/// Grid lines, both axes with their ticks and tick labels, and the axis labels.
std::string axes(const LineChart& chart, const Frame& f) {
  std::string out = "<g class=\"grid\" stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
  for (const double v : f.x.values) out += line(f.px(v), kTop, f.px(v), kBottom);
  for (const double v : f.y.values) out += line(kLeft, f.py(v), kRight, f.py(v));
  out += "</g>\n<g class=\"axes\" stroke=\"black\" stroke-width=\"1\">\n";
  out += line(kLeft, kBottom, kRight, kBottom, "class=\"x-axis\"");
  out += line(kLeft, kTop, kLeft, kBottom, "class=\"y-axis\"");
  for (const double v : f.x.values) out += line(f.px(v), kBottom, f.px(v), kBottom + 5);
  for (const double v : f.y.values) out += line(kLeft - 5, f.py(v), kLeft, f.py(v));
  out += "</g>\n<g class=\"tick-labels\">\n";
  for (size_t i = 0; i < f.x.values.size(); ++i) {
    out += fmt::format("<text class=\"x-tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       num(f.px(f.x.values[i])), num(kBottom + 19), f.x.labels[i]);
  }
  for (size_t i = 0; i < f.y.values.size(); ++i) {
    out += fmt::format("<text class=\"y-tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", num(kLeft - 8),
                       num(f.py(f.y.values[i]) + 4), f.y.labels[i]);
  }
  out += "</g>\n";
  out += fmt::format("<text class=\"x-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     num(kLeft + kPlotWidth / 2), num(kBottom + 40), xml_escape(chart.x_label));
  out += fmt::format(
      "<text class=\"y-label\" x=\"0\" y=\"0\" transform=\"translate(18 {}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      num(kTop + kPlotHeight / 2), xml_escape(chart.y_label));
  return out;
}

/// The dash pattern of series `k` ("" solid): it changes after every cycle of colours and
/// also every other series, so two curves lying on top of each other stay distinguishable.
std::string dash(size_t k) {
  static const char* patterns[] = {"", "7 3", "2 3", "9 3 2 3"};
  return patterns[(k + k / 10) % 4];
}

/// A marker of series `k` at (x, y): circle, square, triangle, diamond in turn.
std::string marker(size_t k, double x, double y, const std::string& colour) {
  switch (k % 4) {
    case 1:
      return fmt::format("<rect x=\"{}\" y=\"{}\" width=\"5\" height=\"5\" fill=\"{}\" stroke=\"none\"/>\n",
                         num(x - 2.5), num(y - 2.5), colour);
    case 2:
      return fmt::format("<polygon points=\"{},{} {},{} {},{}\" fill=\"{}\" stroke=\"none\"/>\n", num(x), num(y - 3.5),
                         num(x - 3), num(y + 2.5), num(x + 3), num(y + 2.5), colour);
    case 3:
      return fmt::format("<polygon points=\"{},{} {},{} {},{} {},{}\" fill=\"{}\" stroke=\"none\"/>\n", num(x),
                         num(y - 3.5), num(x + 3.5), num(y), num(x), num(y + 3.5), num(x - 3.5), num(y), colour);
    default:
      return fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\" stroke=\"none\"/>\n", num(x), num(y),
                         colour);
  }
}

std::string dash_attribute(size_t k) {
  const std::string d = dash(k);
  return d.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", d);
}

/// Series `k`: its band (hi forwards, lo backwards), its polyline, and markers at its points.
std::string series(const Series& s, size_t k, const Frame& f) {
  std::string out;
  if (!s.lo.empty()) {
    std::string points;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (finite_point(s, i)) points += f.point(s.x[i], s.hi[i]) + " ";
    }
    for (size_t i = s.x.size(); i-- > 0;) {
      if (finite_point(s, i)) points += f.point(s.x[i], s.lo[i]) + " ";
    }
    out += fmt::format("<polygon class=\"band\" points=\"{}\" fill=\"{}\" fill-opacity=\"0.15\" stroke=\"none\"/>\n",
                       points, colour(k));
  }
  std::string points, dots;
  size_t count = 0;
  for (size_t i = 0; i < s.x.size(); ++i) {
    if (!finite_point(s, i)) continue;
    if (count++ > 0) points += ' ';
    points += f.point(s.x[i], s.y[i]);
    dots += marker(k, f.px(s.x[i]), f.py(s.y[i]), colour(k));
  }
  out += fmt::format("<polyline class=\"series\" data-label=\"{}\" points=\"{}\" stroke=\"{}\"{}/>\n",
                     xml_escape(s.label), points, colour(k), dash_attribute(k));
  // Dots mark the epochs (and show a run of one epoch, which has no line to draw).
  return out + (count <= kMaxDots ? dots : "");
}

/// The reference lines across the plot, grey and dashed.
std::string references(const LineChart& chart, const Frame& f) {
  std::string out;
  for (const Reference& r : chart.references) {
    if (!std::isfinite(r.y)) continue;
    out += "<g class=\"reference\">" +
           line(kLeft, f.py(r.y), kRight, f.py(r.y), "stroke=\"#555555\" stroke-width=\"1.5\" stroke-dasharray=\"4 4\"") +
           "</g>\n";
  }
  return out;
}

/// One entry per series (and reference line), to the right of the plot, so it never hides a line.
std::string legend(const LineChart& chart) {
  std::string out = "<g class=\"legend\">\n";
  const double x = kRight + kLegendGap;
  for (size_t k = 0; k < chart.series.size() + chart.references.size(); ++k) {
    const double y = kTop + 10 + kLegendLine * static_cast<double>(k);
    const bool ref = k >= chart.series.size();
    const std::string style =
        ref ? "stroke=\"#555555\" stroke-width=\"1.5\" stroke-dasharray=\"4 4\""
            : fmt::format("stroke=\"{}\" stroke-width=\"2\"{}", colour(k), dash_attribute(k));
    out += "<g class=\"legend-entry\">" + line(x, y, x + 24, y, style) + (ref ? "" : marker(k, x + 12, y, colour(k))) +
           fmt::format("<text x=\"{}\" y=\"{}\">{}</text></g>\n", num(x + 30), num(y + 4),
                       xml_escape(ref ? chart.references[k - chart.series.size()].label : chart.series[k].label));
  }
  return out + "</g>\n";
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_svg(const LineChart& chart) {
  const Frame f = frame_of(chart);
  size_t longest = 0;
  for (const Series& s : chart.series) longest = std::max(longest, s.label.size());
  for (const Reference& r : chart.references) longest = std::max(longest, r.label.size());
  const size_t entries = chart.series.size() + chart.references.size();
  const double legend_width = entries == 0 ? 0 : 40 + kCharWidth * static_cast<double>(longest);
  const double width = kRight + kLegendGap + legend_width + 20;
  const double height = std::max(kBottom + 50, kTop + 20 + kLegendLine * static_cast<double>(entries));
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text class=\"title\" x=\"{2}\" y=\"22\" font-size=\"15\">{3}</text>\n",
      width, height, num(kLeft), xml_escape(chart.title));
  out += axes(chart, f);
  out += "<g class=\"data\" fill=\"none\" stroke-width=\"2\">\n";
  for (size_t k = 0; k < chart.series.size(); ++k) out += series(chart.series[k], k, f);
  out += "</g>\n" + references(chart, f) + legend(chart);
  return out + "</svg>\n";
}

}  // namespace pipelab::tools
