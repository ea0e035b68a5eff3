#pragma once
/// A line chart as a standalone SVG file (no Python, no plotting library): axes with nice
/// ticks and labels, light grid lines, one polyline per series with optional min-max band,
/// and a legend beside the plot so it never hides a line.
#include <string>
#include <vector>

namespace pipelab::tools {

/// One line. Points with a non-finite x or y are left out (a diverged epoch).
struct Series {
  std::string label;
  std::vector<double> x, y;
  std::vector<double> lo, hi;  ///< a band around the line (same length as x), or empty
};

/// A horizontal reference line (e.g. the single-device run's final accuracy).
struct Reference {
  std::string label;
  double y = 0;
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::vector<Reference> references;
  bool integer_x = false;  ///< x ticks at whole numbers (epochs)
  /// Runs left out and why ("NAME: metrics/epochs.csv line 3 has 5 fields, the header 12"):
  /// printed as warnings, not drawn.
  std::vector<std::string> notes;
};

/// The chart as SVG text. The elements carry classes for tools and tests: `x-axis` and
/// `y-axis` lines, `x-tick`/`y-tick` labels, `series` polylines (one per series, with
/// data-label), `band` polygons, `reference` lines, `legend-entry` groups. Series differ
/// in colour and, so that overlapping ones stay apart, in dash pattern and marker shape.
std::string render_svg(const LineChart& chart);

/// `text` with &, <, > and " escaped for XML.
std::string xml_escape(const std::string& text);

}  // namespace pipelab::tools
