#include "core/train/stage_costs.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "core/train/run_record.h"

namespace pipelab {
namespace {

double ratio(int64_t total, int64_t count) {
  return count > 0 ? static_cast<double>(total) / static_cast<double>(count) : 0.0;
}

/// A count written as an integer when it is one (micro_batch_size, mean bytes), so that a
/// reader comparing it with nbytes sees the same number.
nlohmann::json number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e15) return static_cast<int64_t>(v);
  return v;
}

template <class T>
T at_or(const std::vector<T>& v, size_t i, T fallback) {
  return i < v.size() ? v[i] : fallback;
}

}  // namespace

int64_t tensor_bytes(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const at::Tensor& t : tensors) n += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0;
  return n;
}

std::vector<double> last_stage_metric(const std::string& stages_csv, const std::string& metric, int stages,
                                      double fallback) {
  std::vector<double> out(static_cast<size_t>(stages), fallback);
  // Lines are appended in time order: the last one wins.
  for_each_stage_metric(stages_csv, [&](int s, const std::string& name, double value) {
    if (name == metric && s >= 0 && s < stages) out[static_cast<size_t>(s)] = value;
  });
  return out;
}

namespace {

/// The mean bytes stage `s`'s actions of `kind` allocated and still held when they ended,
/// less the message each made (an I's input gradient leaves with its send; an F's output is
/// what the next stage computes from, counted with what the F keeps).
double retained_per_action(const ExecStats& stats, size_t s, ActionKind kind, bool less_message) {
  int64_t retained = 0, actions = 0;
  if (s < stats.actions.size()) {
    for (const ActionRecord& a : stats.actions[s]) {
      if (a.kind != kind) continue;
      retained += std::max<int64_t>(0, a.retained_bytes - (less_message ? a.bytes : 0));
      ++actions;
    }
  }
  return ratio(retained, actions);
}

/// With sequence segments, each segment's part of stage `s`'s compute seconds (F, B, I, W
/// of the units of that segment); empty without segments or records.
nlohmann::json segment_shares(const ExecStats& stats, size_t s, int segments) {
  nlohmann::json out = nlohmann::json::array();
  if (segments <= 1 || s >= stats.actions.size()) return out;
  std::vector<double> seconds(static_cast<size_t>(segments), 0.0);
  double total = 0;
  for (const ActionRecord& a : stats.actions[s]) {
    if (a.mb < 0 || !is_compute(a.kind) || a.kind == ActionKind::Update || a.kind == ActionKind::Head) continue;
    seconds[static_cast<size_t>(a.mb % segments)] += a.end - a.start;
    total += a.end - a.start;
  }
  if (total <= 0) return out;
  for (const double t : seconds) out.push_back(t / total);
  return out;
}

/// A kind's typical transient on stage `s`: the median rise above the level at the action's
/// start. The median, not the peak: a mini-batch's first backward also allocates the
/// gradient, which the simulator counts apart (with the weights).
int64_t median_rise(const ExecStats& stats, size_t s, ActionKind kind) {
  std::vector<int64_t> rises;
  if (s < stats.actions.size()) {
    for (const ActionRecord& a : stats.actions[s]) {
      if (a.kind == kind) rises.push_back(a.peak_rise_bytes);
    }
  }
  if (rises.empty()) return 0;
  std::nth_element(rises.begin(), rises.begin() + static_cast<std::ptrdiff_t>(rises.size() / 2), rises.end());
  return rises[rises.size() / 2];
}

}  // namespace

std::string stage_costs_json(const ExecStats& stats, const StageCostInputs& in) {
  nlohmann::json root;
  root["format"] = "pipelab-stage-costs";
  root["version"] = 1;
  root["executor"] = in.executor;
  root["scheme"] = in.scheme;
  root["micro_batches"] = in.micro_batches;
  root["micro_batch_size"] = number(in.micro_batch_size);
  root["segments"] = in.segments;
  if (in.sequence_length > 0) root["sequence_length"] = in.sequence_length;
  if (in.ragged) root["ragged"] = true;
  root["dtype"] = in.dtype;
  root["topology"] = nlohmann::json::parse(in.topology.json().str());
  root["step_seconds"] = in.step_seconds;
  root["steps"] = in.steps;
  if (!in.compression.empty()) root["compression"] = in.compression;
  nlohmann::json stages = nlohmann::json::array();
  const size_t n = stats.stages();
  for (size_t s = 0; s < n; ++s) {
    nlohmann::json st;
    st["stage"] = s;
    st["device"] = at_or(in.placement, s, static_cast<int>(s));
    for (const ActionKindInfo& k : action_kinds()) {
      if (k.role == KindRole::Compute) st[k.cost_key] = stats.time[k.kind][s].mean();
    }
    // Edge s carries s -> s+1 forward; edge s-1 carries s -> s-1 backward (ExecStats).
    st["activation_bytes"] = s + 1 < n ? number(ratio(stats.bytes_forward[s], stats.messages_forward[s])) : number(0);
    st["gradient_bytes"] = s > 0 ? number(ratio(stats.bytes_backward[s - 1], stats.messages_backward[s - 1])) : number(0);
    st["retained_bytes"] = number(retained_per_action(stats, s, ActionKind::Forward, false));
    st["backward_input_kept_bytes"] = number(retained_per_action(stats, s, ActionKind::BackwardInput, true));
    // What an OFFLOAD moved (partition.offload; 0 without): the saved tensors nothing else
    // holds, less than retained_bytes.
    const ActionTime& offloads = stats.time[ActionKind::Offload][s];
    st["offload_bytes"] = number(offloads.count > 0 ? static_cast<double>(stats.bytes[ActionKind::Offload][s]) / offloads.count : 0.0);
    // The boundary codecs' work per micro-batch (0 without compression): encoding what the
    // stage sends and decoding what it receives, apart from the compute they follow.
    const auto codec = [&](ActionKind send, ActionKind recv) { return stats.time[send][s].mean() + stats.time[recv][s].mean(); };
    st["codec_forward_seconds"] = codec(ActionKind::SendF, ActionKind::RecvF);
    st["codec_backward_seconds"] = codec(ActionKind::SendB, ActionKind::RecvB);
    for (const ActionKindInfo& k : action_kinds()) {
      if (k.role == KindRole::Compute) st[std::string(k.cost_key) + "_transient_bytes"] = median_rise(stats, s, k.kind);
    }
    st["peak_activation_bytes"] = at_or<int64_t>(stats.peak_activation_bytes, s, 0);
    st["device_peak_bytes"] = at_or<int64_t>(stats.device_peak_bytes, static_cast<size_t>(st["device"].get<int>()), 0);
    st["host_peak_bytes"] = at_or<int64_t>(stats.host_peak_bytes, static_cast<size_t>(st["device"].get<int>()), 0);
    if (at_or<int64_t>(in.cuda_reserved_peak_bytes, s, 0) > 0) {
      st["cuda_device"] = in.cuda_device[s];
      st["cuda_allocated_peak_bytes"] = in.cuda_allocated_peak_bytes[s];
      st["cuda_reserved_peak_bytes"] = in.cuda_reserved_peak_bytes[s];
    }
    st["parameter_bytes"] = at_or<int64_t>(in.parameter_bytes, s, 0);
    st["tied_bytes"] = at_or<int64_t>(in.tied_bytes, s, 0);
    st["buffer_bytes"] = at_or<int64_t>(in.buffer_bytes, s, 0);
    st["optimizer_bytes"] = at_or<int64_t>(in.optimizer_bytes, s, 0);
    st["stored_versions"] = number(at_or(in.stored_versions, s, 1.0));
    if (in.segments > 1) st["segment_shares"] = segment_shares(stats, s, in.segments);
    stages.push_back(st);
  }
  root["stages"] = stages;
  return root.dump(1) + "\n";
}

}  // namespace pipelab
