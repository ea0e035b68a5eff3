#include "tools/simulate/svg_timeline.h"

#include <fmt/format.h>

#include <algorithm>

#include "tools/report/svg_plot.h"
#include "tools/report/ticks.h"

namespace pipelab::sim {
namespace {

const char* colour(ActionKind k) {
  switch (k) {
    case ActionKind::Forward: return "#4e79a7";
    case ActionKind::Backward: return "#59a14f";
    case ActionKind::BackwardInput: return "#8cd17d";
    case ActionKind::BackwardWeight: return "#b6992d";
    case ActionKind::Head: return "#f28e2b";
    case ActionKind::Update: return "#79706e";
    case ActionKind::Offload: return "#e15759";
    case ActionKind::Reload: return "#76b7b2";
    default: return "#bab0ac";
  }
}

}  // namespace

std::string render_timeline_svg(const SimResult& r, const std::string& title) {
  const double left = 70, right = 20, top = 40, row = 26, gap = 4, plot_w = 900;
  const double mem_h = 140, mem_gap = 50;
  const double rows_h = r.devices * (row + gap);
  const double height = top + rows_h + 30 + mem_gap + mem_h + 40 + 16.0 * ((r.devices + 9) / 10);
  const double width = left + plot_w + right;
  const double end = std::max(r.makespan, 1e-12);
  const tools::Ticks t = tools::nice_ticks(0, end * 1e3, 8);  // milliseconds
  const double span_ms = std::max(t.hi, end * 1e3);
  const auto x_of = [&](double seconds) { return left + plot_w * seconds * 1e3 / span_ms; };
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{:.0f}\" y=\"22\" font-size=\"14\">{}</text>\n",
      width, height, left, tools::xml_escape(title));
  for (int d = 0; d < r.devices; ++d) {
    const double y = top + d * (row + gap);
    out += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">device {}</text>\n", left - 6, y + row * 0.65, d);
    for (const TimedAction& x : r.timeline.devices[static_cast<size_t>(d)]) {
      if (!is_compute(x.action.kind)) continue;
      const double x0 = x_of(x.start), w = std::max(x_of(x.end) - x0, 0.5);
      const std::string name = x.action.str();
      out += fmt::format(
          "<rect class=\"action\" data-action=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" "
          "fill=\"{}\" stroke=\"white\" stroke-width=\"0.5\"><title>{} {:.3f}-{:.3f} ms</title></rect>\n",
          name, x0, y, w, row, colour(x.action.kind), name, x.start * 1e3, x.end * 1e3);
      if (w > 7.5 * static_cast<double>(name.size())) {
        out += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" fill=\"white\" text-anchor=\"middle\">{}</text>\n", x0 + w / 2,
                           y + row * 0.65, name);
      }
    }
  }
  // The copies to and from the host (partition.offload): a thin bar along the bottom of
  // their device's row, on its host link's clock, over whatever the device computes then.
  for (const TimedTransfer& c : r.timeline.copies) {
    const double y = top + c.from * (row + gap) + row - 6;
    const double x0 = x_of(c.start), w = std::max(x_of(c.end) - x0, 0.5);
    const std::string name = c.send.str();
    out += fmt::format(
        "<rect class=\"copy\" data-action=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"6\" "
        "fill=\"{}\" stroke=\"white\" stroke-width=\"0.5\"><title>{} on the host link {:.3f}-{:.3f} ms</title></rect>\n",
        name, x0, y, w, colour(c.send.kind), name, c.start * 1e3, c.end * 1e3);
  }
  // Time axis.
  const double axis_y = top + rows_h + 4;
  out += fmt::format("<line class=\"x-axis\" x1=\"{:.0f}\" y1=\"{:.1f}\" x2=\"{:.0f}\" y2=\"{:.1f}\" stroke=\"black\"/>\n",
                     left, axis_y, left + plot_w, axis_y);
  for (size_t i = 0; i < t.values.size(); ++i) {
    const double x = left + plot_w * t.values[i] / span_ms;
    out += fmt::format("<text class=\"x-tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x,
                       axis_y + 14, t.labels[i]);
  }
  out += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"middle\">time (ms)</text>\n", left + plot_w / 2,
                     axis_y + 28);
  // Memory per device.
  double peak = 0;
  for (const double p : r.peak_bytes) peak = std::max(peak, p);
  const tools::Ticks m = tools::nice_ticks(0, std::max(peak, 1.0) / (1 << 20), 4);
  const double mem_top = axis_y + mem_gap, mem_bottom = mem_top + mem_h;
  const auto y_of = [&](double bytes) { return mem_bottom - mem_h * bytes / (1 << 20) / std::max(m.hi, 1e-12); };
  out += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\">memory per device (MiB)</text>\n", left, mem_top - 8);
  for (size_t i = 0; i < m.values.size(); ++i) {
    const double y = mem_bottom - mem_h * m.values[i] / std::max(m.hi, 1e-12);
    out += fmt::format("<text class=\"y-tick\" x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 6,
                       y + 4, m.labels[i]);
    out += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.1f}\" x2=\"{:.0f}\" y2=\"{:.1f}\" stroke=\"#eeeeee\"/>\n", left, y,
                       left + plot_w, y);
  }
  static const char* kLines[] = {"#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};
  for (int d = 0; d < r.devices; ++d) {
    std::string points;
    double last = r.memory[static_cast<size_t>(d)].empty() ? 0 : r.memory[static_cast<size_t>(d)].front().bytes;
    for (const MemoryPoint& p : r.memory[static_cast<size_t>(d)]) {
      points += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x_of(p.time), y_of(last), x_of(p.time), y_of(p.bytes));
      last = p.bytes;
    }
    points += fmt::format("{:.1f},{:.1f}", x_of(r.makespan), y_of(last));
    out += fmt::format("<polyline class=\"memory\" data-device=\"{}\" fill=\"none\" stroke=\"{}\" points=\"{}\"/>\n", d,
                       kLines[d % 8], points);
    // Legend under the plot: a swatch and the device per entry.
    const double lx = left + 90.0 * (d % 10), ly = mem_bottom + 24 + 16.0 * (d / 10);
    out += fmt::format("<g class=\"legend-entry\"><line x1=\"{:.0f}\" y1=\"{:.0f}\" x2=\"{:.0f}\" y2=\"{:.0f}\" stroke=\"{}\" "
                       "stroke-width=\"2\"/><text x=\"{:.0f}\" y=\"{:.0f}\">device {}</text></g>\n",
                       lx, ly, lx + 18, ly, kLines[d % 8], lx + 22, ly + 4, d);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace pipelab::sim
