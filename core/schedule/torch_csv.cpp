/// torch.distributed.pipelining's CSV (`_dump_csv`, `_load_csv`; torch 2.15): a row per rank,
/// an action per cell, an empty cell an idle slot. Both of torch's formats train as they are
/// (docs/schedules.md's table of action types, with pipelab's decisions):
/// - F, B, I, W: as pipelab's own; `(a;b)OVERLAP_F_B` (DualPipeV): its sub-actions, in order
///   (torch's default runtime runs them so);
/// - SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, WAIT_SEND_B (the compute_comms format):
///   dropped, and the compute order lowered again (core/schedule/lower.h). torch's lowering
///   leaves out the messages between two stages of one rank (a V's turn), which pipelab's
///   executors exchange as every other; the compute order, which alone sets the numbers, is
///   kept;
/// - REDUCE_GRAD, WAIT_REDUCE_GRAD: accepted only after the stage's last backward, and
///   dropped: pipelab scales and reduces the gradient at the stage's update;
/// - UNSHARD, RESHARD: dropped. torch writes them into every compute_comms file and its runtime
///   skips them for a stage that is not FSDP-sharded, which no pipelab stage is (a strict reading
///   would refuse them, but then no compute_comms file could train);
/// - torch's optimizer step is outside the schedule: a file without any U gets one per stage,
///   right after that stage's last action (pipelab's own files may write U).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "core/schedule/schedule.h"
#include "core/schedule/schedule_reader.h"
#include "core/util/error.h"
#include "core/util/names.h"

namespace pipelab {
namespace {

using detail::Reader;
using detail::Tokens;

/// Where a REDUCE_GRAD was written: its stage, and how many actions its device held before it.
struct Reduce {
  int stage, device;
  size_t before;
  int line, column;
};

/// A cell's leading stage number and the rest ("2REDUCE_GRAD" -> 2, "REDUCE_GRAD").
std::pair<int, std::string> split_stage(const std::string& cell) {
  size_t k = 0;
  while (k < cell.size() && k < 6 && std::isdigit(static_cast<unsigned char>(cell[k]))) ++k;
  return {k > 0 ? std::stoi(cell.substr(0, k)) : -1, cell.substr(k)};
}

/// One row's cells as pipelab tokens: compounds expanded, torch's no-op actions dropped,
/// REDUCE_GRADs noted in `reduces` (device `device`, `held` actions on it so far).
Tokens row_tokens(const Reader& reader, const Tokens& cells, int device, size_t held, int line,
                  std::vector<Reduce>& reduces) {
  Tokens out;
  for (const auto& [cell, column] : cells) {
    if (cell.front() == '(') {
      const size_t close = cell.find(')');
      if (close == std::string::npos || cell.substr(close + 1) != "OVERLAP_F_B") {
        reader.fail(line, column, fmt::format("'{}' is not a compound action", printable(cell)),
                    "write torch's compound as (0F1;3B0)OVERLAP_F_B");
      }
      const std::string inner = cell.substr(1, close - 1);
      size_t start = 0;
      for (;;) {
        const size_t semi = std::min(inner.find(';', start), inner.size());
        const std::string part = inner.substr(start, semi - start);
        if (!part.empty()) out.emplace_back(part, column);
        if (semi >= inner.size()) break;
        start = semi + 1;
      }
      continue;
    }
    const auto [stage, kind] = split_stage(cell);
    const bool message = kind.rfind("SEND_F", 0) == 0 || kind.rfind("RECV_F", 0) == 0 || kind.rfind("SEND_B", 0) == 0 ||
                         kind.rfind("RECV_B", 0) == 0 || kind.rfind("WAIT_SEND_", 0) == 0;
    if (stage >= 0 && (message || kind == "UNSHARD" || kind == "RESHARD")) continue;
    if (stage >= 0 && (kind == "REDUCE_GRAD" || kind == "WAIT_REDUCE_GRAD")) {
      reduces.push_back({stage, device, held + out.size(), line, column});
      continue;
    }
    out.emplace_back(cell, column);
  }
  return out;
}

/// A REDUCE_GRAD before some backward of its stage: torch reduces the gradient there, so the
/// file means something pipelab would not do.
void check_reduces(const Reader& reader, const Schedule& s, const std::vector<Reduce>& reduces) {
  for (const Reduce& r : reduces) {
    const auto& actions = s.device(r.device);
    for (size_t i = r.before; i < actions.size(); ++i) {
      const ActionKind k = actions[i].kind;
      if (actions[i].stage == r.stage && is_compute(k) && k != ActionKind::Update) {
        reader.fail(r.line, r.column,
                    fmt::format("stage {}'s REDUCE_GRAD comes before its {}", r.stage, actions[i].str()),
                    "put REDUCE_GRAD after the stage's last backward (pipelab reduces at the update), or leave it out");
      }
    }
  }
}

/// `s` with one U per stage right after the stage's last action on its device, when it has
/// none at all (torch steps the optimizer outside the schedule).
Schedule with_updates(const Schedule& s) {
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) {
      if (a.kind == ActionKind::Update) return s;
    }
  }
  Schedule out(s.stages(), s.devices());
  auto where = std::make_shared<ScheduleSource>(s.source() ? *s.source() : ScheduleSource{});
  where->at.resize(static_cast<size_t>(s.devices()));
  for (int d = 0; d < s.devices(); ++d) {
    const auto& actions = s.device(d);
    std::map<int, size_t> last;  // stage -> index of its last action here
    for (size_t i = 0; i < actions.size(); ++i) last[actions[i].stage] = i;
    std::vector<SourcePosition> at;
    const std::vector<SourcePosition>& from = where->at[static_cast<size_t>(d)];
    for (size_t i = 0; i < actions.size(); ++i) {
      out.add(d, actions[i]);
      const SourcePosition p = i < from.size() ? from[i] : SourcePosition{};
      at.push_back(p);
      if (last[actions[i].stage] == i) {
        out.add(d, Action::U(actions[i].stage));
        at.push_back(p);
      }
    }
    where->at[static_cast<size_t>(d)] = at;
  }
  out.set_source(where);
  return out;
}

}  // namespace

Schedule Schedule::parse_csv(const std::string& text, const std::string& source) {
  Reader reader(text, source);
  std::vector<Reduce> reduces;
  std::vector<size_t> held;
  for (size_t n = 0; n < reader.lines().size(); ++n) {
    const std::string& line = reader.lines()[n];
    Tokens cells;
    size_t start = 0;
    for (;;) {
      const size_t comma = std::min(line.find(',', start), line.size());
      const std::string cell = line.substr(start, comma - start);
      const size_t a = cell.find_first_not_of(" \t\"");
      if (a != std::string::npos) {
        const size_t b = cell.find_last_not_of(" \t\"");
        cells.emplace_back(cell.substr(a, b + 1 - a), static_cast<int>(start + a) + 1);
      }
      if (comma >= line.size()) break;
      start = comma + 1;
    }
    const bool blank = line.find_first_not_of(" \t,") == std::string::npos;
    if (blank && reader.devices() == 0) continue;  // leading blank rows
    const int device = static_cast<int>(reader.devices());
    const int line_no = static_cast<int>(n) + 1;
    reader.open_device(device, line_no, 1);
    const Tokens tokens = row_tokens(reader, cells, device, 0, line_no, reduces);
    reader.add(device, tokens, line_no);
  }
  Schedule s = reader.finish();
  check_reduces(reader, s, reduces);
  // Trailing blank rows are not devices.
  int devices = s.devices();
  while (devices > 0 && s.device(devices - 1).empty()) --devices;
  if (devices != s.devices()) {
    Schedule trimmed(s.stages(), devices);
    auto where = std::make_shared<ScheduleSource>(*s.source());
    where->at.resize(static_cast<size_t>(devices));
    for (int d = 0; d < devices; ++d) trimmed.device(d) = s.device(d);
    trimmed.set_source(where);
    s = trimmed;
  }
  return with_updates(s);
}

std::string Schedule::to_csv() const {
  if (replays()) {
    throw UserError("torch's CSV cannot say which earlier output a forward reads (replayed inputs, decoupled greedy "
                    "learning's buffers). Fix: write the text form instead");
  }
  std::string out;
  for (int d = 0; d < devices(); ++d) {
    std::string row;
    for (const Action& a : device(d)) {
      // torch's compute-only format: its runtime adds the messages, and steps outside.
      if (a.kind == ActionKind::AllReduce) {
        throw UserError("torch's CSV has no all-reduce (replicas of the pipeline, a global clip). Fix: write the "
                        "text form instead");
      }
      if (is_memory(a.kind)) {
        throw UserError(
            fmt::format("torch's CSV has no action for {} (activations moved to host memory). Fix: "
                        "write the text form instead",
                        a.str()));
      }
      if (a.kind == ActionKind::Update || !is_compute(a.kind)) continue;
      if (a.kind == ActionKind::Head) {
        throw UserError(fmt::format("torch's CSV has no action for {} (an auxiliary head's backward). Fix: write the "
                                    "text form instead",
                                    a.str()));
      }
      row += (row.empty() ? "" : ",") + a.str();
    }
    out += row + "\r\n";  // as Python's csv module (torch's _dump_csv) ends its rows
  }
  return out;
}

}  // namespace pipelab
