#include "tools/simulate/report.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/records/trace.h"

namespace pipelab::sim {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024, kMiB = 1024.0 * 1024;

/// GiB when any device's peak reaches one, else MiB.
std::pair<double, const char*> memory_unit(const std::vector<SchemeRow>& rows) {
  double most = 0;
  for (const SchemeRow& row : rows) {
    for (const double p : row.result.peak_bytes) most = std::max(most, p);
  }
  return most >= kGiB ? std::pair{kGiB, "GiB"} : std::pair{kMiB, "MiB"};
}

/// MiB with one decimal, or two significant digits below 0.1 (a small model's messages and
/// tied weights would read 0.0 and look like nothing moved).
std::string mib(double bytes) {
  const double v = bytes / kMiB;
  return v == 0 || v >= 0.1 ? fmt::format("{:.1f}", v) : fmt::format("{:.2g}", v);
}

}  // namespace

std::string markdown_table(const std::vector<SchemeRow>& rows) {
  const auto [unit, unit_name] = memory_unit(rows);
  std::string out = fmt::format(
      "| scheme | devices | {1} | stages | micro-batches | step (ms) | samples/s | bubble | "
      "peak memory, max device ({0}) | of it activations ({0}) | bytes moved per step (MiB) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n",
      unit_name, kTopologyColumn);
  for (const SchemeRow& row : rows) {
    if (!row.error.empty()) {
      out += fmt::format("| {} | not simulated: {} | | | | | | | | | |\n", row.name, row.error);
      continue;
    }
    const SimResult& r = row.result;
    const auto peak = std::max_element(r.peak_bytes.begin(), r.peak_bytes.end());
    const size_t d = static_cast<size_t>(peak - r.peak_bytes.begin());
    out += fmt::format("| {} | {} | {} | {} | {} | {:.2f} | {:.0f} | {:.1f}% | {:.2f} | {:.2f} | {} |\n", row.name,
                       r.topology.devices, r.topology.cell(), r.topology.stages, r.units, r.step_seconds * 1e3, r.samples_per_second, 100 * r.bubble,
                       *peak / unit, r.peak_activation_bytes[d] / unit, mib(r.bytes_per_step));
  }
  return out;
}

std::string memory_lines(const std::vector<SchemeRow>& rows) {
  const auto [unit, unit_name] = memory_unit(rows);
  std::string out;
  for (const SchemeRow& row : rows) {
    if (!row.error.empty()) continue;
    out += fmt::format("{}: peak per device ({})", row.name, unit_name);
    for (const double p : row.result.peak_bytes) out += fmt::format(" {:.2f}", p / unit);
    const std::vector<double>& host = row.result.host_peak_bytes;
    if (std::any_of(host.begin(), host.end(), [](double b) { return b > 0; })) {
      out += fmt::format("; offloaded to the host, most at once ({})", unit_name);
      for (const double p : host) out += fmt::format(" {:.2f}", p / unit);
    }
    out += "\n";
  }
  return out;
}

std::string per_scheme_path(const std::string& path, const std::string& scheme, bool several) {
  if (!several) return path;
  std::string name = scheme;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '=' && c != '-') c = '_';
  }
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + "-" + name;
  return path.substr(0, dot) + "-" + name + path.substr(dot);
}

std::string simulated_trace(const SimResult& r) {
  ExecStats stats;
  stats.actions.assign(static_cast<size_t>(r.stages), {});
  for (const auto& row : r.timeline.devices) {
    for (const TimedAction& x : row) {
      if (!is_compute(x.action.kind)) continue;
      ActionRecord a;
      a.kind = x.action.kind;
      a.mb = x.action.mb;
      a.start = x.start;
      a.end = x.end;
      stats.actions[static_cast<size_t>(x.action.stage)].push_back(a);
    }
  }
  TraceArrows options;
  options.process = "pipelab simulate";
  return chrome_trace(stats, r.schedule.placement(), options);
}

}  // namespace pipelab::sim
