#pragma once
/// What every action of a training schedule run did and when, for people and tools:
/// - trace.json in the Chrome trace event format (https://docs.google.com/document/d/
///   1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU, "Trace Event Format"), which Perfetto
///   (ui.perfetto.dev) and chrome://tracing open: one track per device, one complete ("X")
///   slice per action named as the schedule IR writes it ("2F0"), and flow arrows ("s"/"f")
///   from the action that produced a message to the action that consumed it;
/// - metrics/actions.csv, one line per action.
/// Both from ExecStats::actions (host times; on CUDA the device times where resolved).
#include <string>
#include <vector>

#include "core/exec/executor.h"

namespace pipelab {

/// Which messages get arrows: activations from stage s to s+1 (not between data-parallel
/// replicas), gradients from s+1 to s (not for schemes that route their own gradients); and
/// the name of the trace's process track.
struct TraceArrows {
  bool activations = true, gradients = true;
  std::string process = "pipelab run";
};

/// trace.json's text for `stats` (traced), with stage s on device placement[s].
std::string chrome_trace(const ExecStats& stats, const std::vector<int>& placement, TraceArrows arrows = {});

/// metrics/actions.csv's text, device by device in the order each ran its actions:
/// device,stage,action,micro_batch,start,end,bytes_sent (seconds
/// since the epoch's start, device seconds on CUDA where measured; the bytes of the message
/// the action produced for another stage, ActionRecord::bytes).
std::string actions_csv(const ExecStats& stats, const std::vector<int>& placement);

}  // namespace pipelab
