#include "core/exec/trace_merge.h"

#include <fmt/format.h>

#include <sstream>

#include "core/util/error.h"

namespace pipelab {

// One line per item, fields separated by spaces; doubles in fmt's shortest form that
// reads back to the same bits:
//   N <now>
//   A <stage> <kind> <mb> <start> <end> <device_start> <device_end> <bytes> <retained_bytes> <peak_rise_bytes>
//   P <stage> <peak_activation_bytes>
std::string encode_trace(const ExecStats& stats, const std::vector<int>& stages, double now) {
  std::string out = fmt::format("N {}\n", now);
  for (const int s : stages) {
    const size_t r = static_cast<size_t>(s);
    if (r < stats.actions.size()) {
      for (const ActionRecord& a : stats.actions[r]) {
        out += fmt::format("A {} {} {} {} {} {} {} {} {} {}\n", s, static_cast<int>(a.kind), a.mb, a.start, a.end,
                           a.device_start, a.device_end, a.bytes, a.retained_bytes, a.peak_rise_bytes);
      }
    }
    if (r < stats.peak_activation_bytes.size()) out += fmt::format("P {} {}\n", s, stats.peak_activation_bytes[r]);
  }
  return out;
}

void decode_trace(const std::string& text, double now, ExecStats& stats) {
  std::istringstream in(text);
  double shift = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    char what = 0;
    f >> what;
    if (what == 'N') {
      double theirs = 0;
      f >> theirs;
      shift = now - theirs;
    } else if (what == 'A') {
      int s = 0, kind = 0;
      ActionRecord a;
      f >> s >> kind >> a.mb >> a.start >> a.end >> a.device_start >> a.device_end >> a.bytes >> a.retained_bytes >> a.peak_rise_bytes;
      PIPELAB_ASSERT(f && s >= 0 && static_cast<size_t>(s) < stats.actions.size(), "bad trace line '{}'", line);
      a.kind = static_cast<ActionKind>(kind);
      a.start += shift;
      a.end += shift;
      stats.actions[static_cast<size_t>(s)].push_back(a);
    } else if (what == 'P') {
      int s = 0;
      int64_t peak = 0;
      f >> s >> peak;
      PIPELAB_ASSERT(f && s >= 0 && static_cast<size_t>(s) < stats.peak_activation_bytes.size(), "bad peak line '{}'",
                     line);
      stats.peak_activation_bytes[static_cast<size_t>(s)] = peak;
    }
  }
}

}  // namespace pipelab
