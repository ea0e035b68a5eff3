#include "core/exec/trace_merge.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/util/error.h"

namespace pipelab {
namespace {

// Column 0 says what a row is; the rest, by kind:
//   kNow:    now
//   kAction: stage kind mb start end device_start device_end bytes retained_bytes peak_rise_bytes
//   kPeak:   stage peak_activation_bytes
//   kDevicePeak: device peak (a device's stages all live in one process)
//   kHostPeak: device host_peak (offloaded activations)
enum Row { kNow = 0, kAction = 1, kPeak = 2, kDevicePeak = 3, kHostPeak = 4 };

/// Rows of one per-device figure (a device another process runs has none here).
void add_device_rows(Row what, const std::vector<int64_t>& peaks, std::vector<double>& flat) {
  for (size_t d = 0; d < peaks.size(); ++d) {
    if (peaks[d] <= 0) continue;
    std::vector<double> row{static_cast<double>(what), static_cast<double>(d), static_cast<double>(peaks[d])};
    row.resize(kTraceColumns, 0.0);
    flat.insert(flat.end(), row.begin(), row.end());
  }
}

std::vector<double> action_row(int stage, const ActionRecord& a) {
  return {kAction,
          static_cast<double>(stage),
          static_cast<double>(static_cast<int>(a.kind)),
          static_cast<double>(a.mb),
          a.start,
          a.end,
          a.device_start,
          a.device_end,
          static_cast<double>(a.bytes),
          static_cast<double>(a.retained_bytes),
          static_cast<double>(a.peak_rise_bytes)};
}

}  // namespace

at::Tensor trace_rows(const ExecStats& stats, const std::vector<int>& stages, double now) {
  std::vector<double> flat{kNow, now};
  flat.resize(kTraceColumns, 0.0);
  for (const int s : stages) {
    const size_t r = static_cast<size_t>(s);
    if (r < stats.actions.size()) {
      for (const ActionRecord& a : stats.actions[r]) {
        const std::vector<double> row = action_row(s, a);
        flat.insert(flat.end(), row.begin(), row.end());
      }
    }
    if (r < stats.peak_activation_bytes.size()) {
      std::vector<double> row{kPeak, static_cast<double>(s), static_cast<double>(stats.peak_activation_bytes[r])};
      row.resize(kTraceColumns, 0.0);
      flat.insert(flat.end(), row.begin(), row.end());
    }
  }
  add_device_rows(kDevicePeak, stats.device_peak_bytes, flat);
  add_device_rows(kHostPeak, stats.host_peak_bytes, flat);
  const int64_t n = static_cast<int64_t>(flat.size()) / kTraceColumns;
  return at::tensor(flat, at::kDouble).view({n, kTraceColumns});
}

void add_trace_rows(const at::Tensor& rows, double now, ExecStats& stats) {
  PIPELAB_ASSERT(rows.dim() == 2 && rows.size(1) == kTraceColumns && rows.scalar_type() == at::kDouble,
                 "trace rows: {} dimensions, {} columns, type {}", rows.dim(), rows.dim() == 2 ? rows.size(1) : 0,
                 c10::toString(rows.scalar_type()));
  const at::Tensor c = rows.contiguous();
  const auto v = c.accessor<double, 2>();
  double shift = 0;
  for (int64_t i = 0; i < c.size(0); ++i) {
    const auto row = v[i];
    const int what = static_cast<int>(row[0]);
    const int64_t s = static_cast<int64_t>(row[1]);
    if (what == kNow) {
      shift = now - row[1];
    } else if (what == kAction) {
      PIPELAB_ASSERT(s >= 0 && static_cast<size_t>(s) < stats.actions.size(), "trace row for stage {}", s);
      ActionRecord a;
      a.kind = static_cast<ActionKind>(static_cast<int>(row[2]));
      a.mb = static_cast<int>(row[3]);
      a.start = row[4] + shift;
      a.end = row[5] + shift;
      a.device_start = row[6];
      a.device_end = row[7];
      a.bytes = static_cast<int64_t>(row[8]);
      a.retained_bytes = static_cast<int64_t>(row[9]);
      a.peak_rise_bytes = static_cast<int64_t>(row[10]);
      stats.actions[static_cast<size_t>(s)].push_back(a);
    } else if (what == kDevicePeak || what == kHostPeak) {
      PIPELAB_ASSERT(s >= 0 && s < (1 << 16), "trace row for device {}", s);
      std::vector<int64_t>& peaks = what == kDevicePeak ? stats.device_peak_bytes : stats.host_peak_bytes;
      if (peaks.size() <= static_cast<size_t>(s)) peaks.resize(static_cast<size_t>(s) + 1, 0);
      auto& peak = peaks[static_cast<size_t>(s)];
      peak = std::max(peak, static_cast<int64_t>(row[2]));
    } else {
      PIPELAB_ASSERT(what == kPeak && s >= 0 && static_cast<size_t>(s) < stats.peak_activation_bytes.size(),
                     "trace row of kind {} for stage {}", what, s);
      stats.peak_activation_bytes[static_cast<size_t>(s)] = static_cast<int64_t>(row[2]);
    }
  }
}

}  // namespace pipelab
