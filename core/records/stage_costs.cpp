#include "core/records/stage_costs.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/records/cost_record.h"
#include "core/records/run_record.h"

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
std::vector<double> segment_shares(const ExecStats& stats, size_t s, int segments) {
  std::vector<double> out;
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

namespace {

/// Writes a record's fields (core/records/cost_record.h) into a JSON object: the list the
/// reader reads, so no key is spelled twice.
class JsonFields {
 public:
  explicit JsonFields(nlohmann::json& out) : out_(out) {}
  template <class T, class... C>
  void operator()(const std::string& key, const T& value, const char*, C&&...) {
    if constexpr (std::is_same_v<T, double>) {
      out_[key] = number(value);
    } else {
      out_[key] = value;
    }
  }

 private:
  nlohmann::json& out_;
};

template <class R>
nlohmann::json record_json(R& record) {
  nlohmann::json out = nlohmann::json::object();
  JsonFields writer(out);
  record.fields(writer);
  return out;
}

/// Stage `s`'s entry as measured.
StageCostRecord stage_record(const ExecStats& stats, const StageCostInputs& in, size_t s) {
  const size_t n = stats.stages();
  StageCostRecord r;
  r.stage = static_cast<int>(s);
  r.device = at_or(in.placement, s, static_cast<int>(s));
  for (const ActionKindInfo& k : action_kinds()) {
    if (k.role != KindRole::Compute) continue;
    r.seconds[k.kind] = stats.time[k.kind][s].mean();
    r.transient_bytes[k.kind] = static_cast<double>(median_rise(stats, s, k.kind));
  }
  // Edge s carries s -> s+1 forward; edge s-1 carries s -> s-1 backward (ExecStats).
  r.activation_bytes = s + 1 < n ? ratio(stats.bytes_forward[s], stats.messages_forward[s]) : 0;
  r.gradient_bytes = s > 0 ? ratio(stats.bytes_backward[s - 1], stats.messages_backward[s - 1]) : 0;
  r.retained_bytes = retained_per_action(stats, s, ActionKind::Forward, false);
  r.backward_input_kept_bytes = retained_per_action(stats, s, ActionKind::BackwardInput, true);
  // What an OFFLOAD moved (partition.offload; 0 without): the saved tensors nothing else
  // holds, less than retained_bytes.
  const ActionTime& offloads = stats.time[ActionKind::Offload][s];
  r.offload_bytes = offloads.count > 0 ? static_cast<double>(stats.bytes[ActionKind::Offload][s]) / offloads.count : 0.0;
  // The boundary codecs' work per micro-batch (0 without compression): encoding what the
  // stage sends and decoding what it receives, apart from the compute they follow.
  const auto codec = [&](ActionKind send, ActionKind recv) { return stats.time[send][s].mean() + stats.time[recv][s].mean(); };
  r.codec_forward_seconds = codec(ActionKind::SendF, ActionKind::RecvF);
  r.codec_backward_seconds = codec(ActionKind::SendB, ActionKind::RecvB);
  const auto device = static_cast<size_t>(r.device);
  r.peak_activation_bytes = static_cast<double>(at_or<int64_t>(stats.peak_activation_bytes, s, 0));
  r.device_peak_bytes = static_cast<double>(at_or<int64_t>(stats.device_peak_bytes, device, 0));
  r.host_peak_bytes = static_cast<double>(at_or<int64_t>(stats.host_peak_bytes, device, 0));
  if (at_or<int64_t>(in.cuda_reserved_peak_bytes, s, 0) > 0) {
    r.cuda_device = in.cuda_device[s];
    r.cuda_allocated_peak_bytes = static_cast<double>(in.cuda_allocated_peak_bytes[s]);
    r.cuda_reserved_peak_bytes = static_cast<double>(in.cuda_reserved_peak_bytes[s]);
  }
  r.parameter_bytes = static_cast<double>(at_or<int64_t>(in.parameter_bytes, s, 0));
  r.tied_bytes = static_cast<double>(at_or<int64_t>(in.tied_bytes, s, 0));
  r.buffer_bytes = static_cast<double>(at_or<int64_t>(in.buffer_bytes, s, 0));
  r.optimizer_bytes = static_cast<double>(at_or<int64_t>(in.optimizer_bytes, s, 0));
  r.stored_versions = at_or(in.stored_versions, s, 1.0);
  if (in.segments > 1) r.segment_shares = segment_shares(stats, s, in.segments);
  return r;
}

}  // namespace

std::string stage_costs_json(const ExecStats& stats, const StageCostInputs& in) {
  CostRecord record;
  record.executor = in.executor;
  record.scheme = in.scheme;
  record.micro_batches = in.micro_batches;
  record.micro_batch_size = in.micro_batch_size;
  record.segments = in.segments;
  record.sequence_length = static_cast<double>(in.sequence_length);
  record.ragged = in.ragged;
  record.dtype = in.dtype;
  record.step_seconds = in.step_seconds;
  record.steps = static_cast<int>(in.steps);
  record.compression = in.compression;
  nlohmann::json root = record_json(record);
  root["topology"] = nlohmann::json::parse(in.topology.json().str());
  nlohmann::json stages = nlohmann::json::array();
  for (size_t s = 0; s < stats.stages(); ++s) {
    StageCostRecord r = stage_record(stats, in, s);
    stages.push_back(record_json(r));
  }
  root["stages"] = stages;
  return root.dump(1) + "\n";
}

}  // namespace pipelab
