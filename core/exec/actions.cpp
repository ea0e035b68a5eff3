#include "core/exec/actions.h"

#include "core/compress/compression.h"
#include "core/model/model.h"  // kIgnoredTarget
#include "core/nn/document_layout.h"
#include "core/nn/sequence_segment.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <map>

#include "core/schedule/dataflow.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

/// Adds the wall time of its scope to an ActionTime.
class Timed {
 public:
  explicit Timed(ActionTime& t) : t_(t), start_(std::chrono::steady_clock::now()) {}
  ~Timed() {
    t_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    ++t_.count;
  }

 private:
  ActionTime& t_;
  std::chrono::steady_clock::time_point start_;
};

/// Records one action of one stage in ExecStats::actions (when tracing), and charges what
/// it allocates on the host to its stage (MemoryMeter; the scope lives as long as this).
class Traced {
 public:
  Traced(ExecStats& stats, int stage, const Action& a, const c10::Device& device)
      : stats_(stats.trace ? &stats : nullptr), stage_(stage), memory_(stats_ ? stats.memory.get() : nullptr, stage) {
    if (!stats_) return;
    record_.kind = a.kind;
    record_.mb = a.mb;
    record_.device_start_mark = device::mark(device);
    device_ = device;
    record_.start = seconds();
  }
  /// The bytes of the message the action produced for another stage.
  void sent(int64_t bytes) { record_.bytes = bytes; }
  ~Traced() {
    if (!stats_) return;
    // An F's allocations still alive now are its micro-batch's: saved activations, output.
    // An I's: its message and the gradients it keeps for its W (core/stage/weight_pass.h).
    if (record_.kind == ActionKind::Forward || record_.kind == ActionKind::BackwardInput) {
      record_.retained_bytes = memory_.retained();
    }
    record_.peak_rise_bytes = memory_.peak_rise();
    record_.end = seconds();
    record_.device_end_mark = device::mark(device_);
    stats_->actions[static_cast<size_t>(stage_)].push_back(std::move(record_));
  }

 private:
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - stats_->origin).count(); }
  ExecStats* stats_;
  int stage_;
  MemoryMeter::Scope memory_;
  c10::Device device_ = c10::kCPU;
  ActionRecord record_;
};

}  // namespace

namespace {

/// Widens each stage's [low, high] micro-batch range by the numbers `actions` run it on.
void widen(const std::vector<Action>& actions, std::vector<int>& low, std::vector<int>& high) {
  for (const Action& a : actions) {
    if (!takes_micro_batch(a.kind) || a.stage < 0 || static_cast<size_t>(a.stage) >= low.size()) continue;
    const size_t g = static_cast<size_t>(a.stage);
    low[g] = std::min(low[g], a.mb);
    high[g] = std::max(high[g], a.mb);
  }
}

/// The micro-batches of every stage some device of `devices` runs (the others: none).
std::vector<ReplicaMicroBatches> micro_batch_ranges(const Schedule& s, const std::vector<int>& devices) {
  std::vector<int> low(static_cast<size_t>(s.stages()), INT_MAX), high(static_cast<size_t>(s.stages()), -1);
  for (const int d : devices) widen(s.device(d), low, high);
  std::vector<ReplicaMicroBatches> out(low.size());
  for (size_t g = 0; g < out.size(); ++g) {
    // A replicated stage (unequal replica counts) takes every R-th micro-batch.
    const int position = s.position_of(static_cast<int>(g));
    const int stride = s.layout().uniform() ? 1 : s.layout().counts().at(static_cast<size_t>(position));
    if (high[g] >= 0) out[g] = {low[g], (high[g] - low[g]) / stride + 1, stride};
  }
  return out;
}

}  // namespace

std::vector<ReplicaMicroBatches> replica_micro_batches(const Schedule& s) {
  std::vector<int> devices(static_cast<size_t>(s.devices()));
  for (int d = 0; d < s.devices(); ++d) devices[static_cast<size_t>(d)] = d;
  return micro_batch_ranges(s, devices);
}

void begin_run(std::vector<StageSlot>& slots, const Schedule& s, RunMode mode) {
  const std::vector<ReplicaMicroBatches> own = replica_micro_batches(s);
  for (size_t g = 0; g < slots.size(); ++g) {
    StageSlot& slot = slots[g];
    if (!slot.stage) continue;
    slot.stage->set_training(mode == RunMode::Train);
    if (mode == RunMode::Train) slot.policy->begin(*slot.stage, g < own.size() ? own[g].count : 0);
  }
}

void end_run(std::vector<StageSlot>& slots, RunMode mode) {
  if (mode != RunMode::Train) return;
  for (StageSlot& slot : slots) {
    if (slot.stage) slot.policy->end(*slot.stage);
  }
}

void count_message(ExecStats& stats, int from, int to, bool forward, const Message& m) {
  if (m.empty()) return;
  // With replicated stages the stage numbers of two neighbours need not be in order.
  const size_t edge = static_cast<size_t>(forward ? from : to);
  auto& bytes = forward ? stats.bytes_forward : stats.bytes_backward;
  auto& count = forward ? stats.messages_forward : stats.messages_backward;
  bytes[edge] += m.bytes();
  ++count[edge];
}

// A stage runs on one device, so that device's actions give its micro-batches (a run builds
// one DeviceWork per device: reading only its own actions keeps that linear).
DeviceWork::DeviceWork(const Schedule& s, int device, const std::map<int, int>& group_devices)
    : s_(s), device_(device), own_(micro_batch_ranges(s, {device})) {
  for (const Action& a : s.device(device)) {
    if (is_send(a.kind)) sends_.insert({a.stage, payload(a.kind), a.mb});
    if (a.kind == ActionKind::Offload) offloads_.insert({a.stage, a.mb});
    if (kind_info(a.kind).role != KindRole::Collective) continue;
    std::vector<int>& here = here_[s.collective_group(a.stage)];
    if (std::find(here.begin(), here.end(), a.stage) == here.end()) here.push_back(a.stage);
  }
  if (here_.empty()) return;  // no collective on this device
  joins_ = collective_arrivals(s, device);
  for (const auto& [group, stages] : here_) devices_[group] = group_devices.at(group);
}

std::vector<DeviceWork> device_work(const Schedule& s) {
  const std::map<int, int> group_devices = collective_devices(s);
  std::vector<DeviceWork> work;
  for (int d = 0; d < s.devices(); ++d) work.emplace_back(s, d, group_devices);
  return work;
}

int64_t DeviceWork::produced(int stage, char kind, int mb, Message m) {
  if (!sends_.count({stage, kind, mb})) return 0;
  const int64_t bytes = m.bytes();
  results_[{stage, kind, mb}] = std::move(m);
  return bytes;
}

Message DeviceWork::take_result(int stage, char kind, int mb) {
  auto it = results_.find({stage, kind, mb});
  PIPELAB_ASSERT(it != results_.end(), "stage {} sends its {} result of micro-batch {} before computing it", stage, kind, mb);
  Message m = std::move(it->second);
  results_.erase(it);
  return m;
}

void DeviceWork::received(int stage, char kind, int mb, Message m) {
  if (kind == 'F') {
    // A replayed output no forward reads (DGL's replay, docs/schemes.md, "dgl") is dropped as it
    // arrives.
    const int readers = s_.readers(stage, mb);
    if (readers > 0) inputs_[{stage, mb}] = {std::move(m), readers};
  } else {
    gradients_[{stage, mb}].push_back(std::move(m));
  }
}

Message DeviceWork::take_input(int stage, int mb) {
  auto it = inputs_.find({stage, mb});
  PIPELAB_ASSERT(it != inputs_.end(), "stage {} has no input for micro-batch {}", stage, mb);
  // A replayed input stays until its last reader (the stage detaches what it reads).
  if (--it->second.readers > 0) return it->second.message;
  Message m = std::move(it->second.message);
  inputs_.erase(it);
  return m;
}

std::vector<Message> DeviceWork::take_gradients(int stage, int mb) {
  auto it = gradients_.find({stage, mb});
  if (it == gradients_.end()) return {};
  std::vector<Message> m = std::move(it->second);
  gradients_.erase(it);
  return m;
}

namespace {

/// What a compute action has at hand (one per action, on its device's thread). The feed and
/// the device's messages know the micro-batch by the schedule's number (a.mb); the stage, its
/// policy and its observers by `mb`, its number within the stage's replica, so that a scheme
/// never sees its replicas (core/schedule/replicate.h numbers replica r's after r-1's).
struct ActionContext {
  const Action& a;
  DeviceWork& work;
  StageSlot& slot;
  Feed& feed;
  RunMode mode;
  int mb;
  MemoryMeter* meter;  ///< null when not measuring
  int64_t moved = 0;   ///< OFFLOAD/RELOAD: the bytes the action moved
  Stage& stage() { return *slot.stage; }
  GradientRoute& route() { return slot.route ? *slot.route : GradientRoute::end_to_end(); }
  /// Tells the stage's observers (training only: evaluation has none to tell).
  template <class Call>
  void notify(Call call) {
    if (mode != RunMode::Train) return;
    for (ActionObserver* o : slot.observers) call(*o);
  }
};

/// What a compute kind does: its one handler (the kind table's "what runs it",
/// core/schedule/action_kinds.h). Returns the message it produced for a neighbour (empty
/// when none); the caller keeps it for the SEND that sends it.
using Handler = Message (*)(ActionContext&);

/// F of `mb`: reads the feed when nothing was received for it.
Message forward(ActionContext& c) {
  Stage& stage = c.stage();
  const int mb = c.mb;
  // With replayed inputs (DGL's, docs/schemes.md, "dgl") the forward reads an earlier output and
  // stands for the feed's micro-batch that output came from.
  const Schedule& s = c.work.schedule();
  const int unit = s.feed_unit(c.a.stage, c.a.mb);
  const int source = s.reads(c.a.stage, c.a.mb);
  const bool received = c.work.has_input(c.a.stage, source);
  Message in = received ? c.work.take_input(c.a.stage, source) : Message{};
  if (!received) in.values = {c.feed.input(unit)};
  PIPELAB_ASSERT(!in.values.empty() && in.values.front().defined(), "stage {}: forward of micro-batch {} has no input",
                 stage.index(), mb);
  for (at::Tensor& t : in.values) t = device::transfer(t, nullptr, stage.device());
  const bool target_needed = c.mode == RunMode::Eval ? stage.is_last() : stage.needs_target();
  const at::Tensor host_target = target_needed ? c.feed.target(unit) : at::Tensor();
  const at::Tensor target = target_needed ? host_target.to(stage.device(), true) : at::Tensor();
  // Ragged text: every block of the stage reads where its tokens' documents start and end.
  const at::Tensor documents = c.feed.documents(unit);
  const at::Tensor layout = documents.defined() ? documents.to(stage.device(), true) : documents;
  const nn::DocumentScope documents_scope(layout);
  ForwardResult result;
  if (c.mode == RunMode::Eval) {
    result = stage.evaluate(in.values, target);
  } else {
    c.slot.policy->before_forward(stage, mb, in);
    c.notify([&](ActionObserver& o) { o.forward(stage, mb); });
    ForwardOptions options;
    options.checkpoint = c.slot.recompute || c.slot.policy->checkpoint(mb);
    options.offloadable = c.work.offloads(c.a.stage, c.a.mb);
    options.target = target;
    // Only the loss is scaled: other stages need not ask (a feed may have to load the
    // mini-batch to answer, as a replica's share in a multi-process run does).
    options.loss_scale = stage.is_last() ? c.feed.loss_scale(unit) : 1.0;
    // A unit that is a segment of its sequences computes in that segment's scope.
    const nn::SequenceSegment segment = c.feed.segment(unit);
    const nn::SegmentScope scope(&segment);
    result = stage.forward(mb, std::move(in.values), options);
  }
  Message out{std::move(result.activations), {}, in.tag};
  if (c.mode == RunMode::Train) c.slot.policy->after_forward(stage, mb, out);
  if (stage.is_last()) {
    // Counted on the host copy of the targets: no wait for the device.
    const int64_t predictions =
        documents.defined() ? predicted_targets(host_target) : host_target.numel();
    c.feed.on_result(unit, {result.loss, result.correct, result.count, predictions, result.confusion});
    return {};
  }
  return out;
}

Message backward(ActionContext& c) {
  Stage& stage = c.stage();
  const int mb = c.mb;
  const std::vector<Message> in = c.work.take_gradients(c.a.stage, c.a.mb);
  c.slot.policy->before_backward(stage, mb);
  c.notify([&](ActionObserver& o) { o.backward(stage, mb); });
  Message out = c.route().backward(stage, mb, in);
  c.slot.policy->after_backward(stage, mb);
  c.notify([&](ActionObserver& o) { o.backward_done(stage, mb); });
  return out;
}

Message backward_input(ActionContext& c) {
  Stage& stage = c.stage();
  const std::vector<Message> in = c.work.take_gradients(c.a.stage, c.a.mb);
  c.slot.policy->before_backward(stage, c.mb);
  c.notify([&](ActionObserver& o) { o.backward(stage, c.mb); });
  // The split backward is end-to-end backprop (zero-bubble schedules); no route splits.
  return {stage.backward_input(c.mb, in.empty() ? Tensors() : in.front().values), {}, in.empty() ? -1 : in.front().tag};
}

Message backward_weight(ActionContext& c) {
  Stage& stage = c.stage();
  stage.backward_weight(c.mb);
  c.slot.policy->after_backward(stage, c.mb);
  c.notify([&](ActionObserver& o) { o.backward_done(stage, c.mb); });
  return {};
}

Message head(ActionContext& c) { return c.route().head(c.stage(), c.mb); }

/// OFFLOAD: the host copy is charged to the stage's host tag, not its device's (the device
/// memory it frees goes back to the stage's own).
Message offload(ActionContext& c) {
  const MemoryMeter::Scope host(c.meter, MemoryMeter::host_tag(c.a.stage));
  c.moved = c.stage().offload(c.mb);
  return {};
}

/// RELOAD: the device copy is the stage's again (the Traced scope's tag).
Message reload(ActionContext& c) {
  c.moved = c.stage().reload(c.mb);
  return {};
}

Message update(ActionContext& c) {
  Stage& stage = c.stage();
  c.notify([&](ActionObserver& o) { o.before_update(stage); });
  c.slot.policy->update(stage);
  c.notify([&](ActionObserver& o) { o.after_update(stage); });
  return {};
}

/// ALLREDUCE's own part, once every member arrived: the sum (and the rest of the
/// GradientPlan) into this member's gradients.
Message all_reduce(ActionContext& c) {
  if (c.slot.all_reduce) c.slot.all_reduce->sum_gradients(c.slot.replica, c.stage().parameters());
  return {};
}

/// One handler per kind that runs on a stage (compute kinds and ALLREDUCE); null for
/// SEND/RECV, which run_action moves through the transport.
const PerKind<Handler>& handlers() {
  static const PerKind<Handler> table = [] {
    PerKind<Handler> h{};
    h[ActionKind::Forward] = forward;
    h[ActionKind::Backward] = backward;
    h[ActionKind::BackwardInput] = backward_input;
    h[ActionKind::BackwardWeight] = backward_weight;
    h[ActionKind::Head] = head;
    h[ActionKind::Update] = update;
    h[ActionKind::AllReduce] = all_reduce;
    h[ActionKind::Offload] = offload;
    h[ActionKind::Reload] = reload;
    return h;
  }();
  return table;
}

/// The compute of `a` (or ALLREDUCE's local part), timed and traced; its result is kept
/// for the SEND that sends it.
void compute(size_t index, const Action& a, DeviceWork& work, StageSlot& slot, Feed& feed, RunMode mode,
             Transport& transport, ExecStats& stats) {
  const Handler handler = handlers()[a.kind];
  PIPELAB_ASSERT(handler, "{} is not a compute action", a.str());
  if (kind_info(a.kind).role == KindRole::Collective && slot.all_reduce && work.joins_collective(index)) {
    // The device joins the round for all its stages of the group: their gradients are
    // queued (on CUDA, on this device's stream; the validator checked that none comes
    // later), and the sum waits for every device's.
    const int group = work.schedule().collective_group(a.stage);
    for (const int stage : work.collective_stages_here(group)) {
      slot.all_reduce->produced(collective_member(work.schedule(), stage));
    }
    transport.collective_barrier(group, work.collective_devices(group));
  }
  Traced traced(stats, a.stage, a, slot.stage->device());
  Timed timed(stats.time[a.kind][static_cast<size_t>(a.stage)]);
  ActionContext context{a, work, slot, feed, mode, work.own_micro_batch(a.stage, a.mb), stats.memory.get()};
  Message out = handler(context);
  const char message = kind_info(a.kind).message;
  if (message) traced.sent(work.produced(a.stage, message, a.mb, std::move(out)));
  if (is_memory(a.kind)) {
    traced.sent(context.moved);
    stats.bytes[a.kind][static_cast<size_t>(a.stage)] += context.moved;
  }
  if (kind_info(a.kind).role == KindRole::Collective) {
    int64_t gradient = 0;
    for (const at::Tensor& p : slot.stage->parameters()) gradient += p.grad().defined() ? p.grad().nbytes() : 0;
    stats.bytes[a.kind][static_cast<size_t>(a.stage)] += gradient;
  }
}

/// The feed's micro-batch a message of `a` carries: an activation's is its sender's
/// (`from`; replayed inputs number micro-batches per stage), a gradient's its own.
int message_unit(const DeviceWork& work, const Action& a, int from) {
  return payload(a.kind) == 'F' ? work.schedule().feed_unit(from, a.mb) : a.mb;
}

[[noreturn]] void rethrow_with_window(const DeviceWork& work, size_t index) {
  const std::string where = "\nwhile running\n  " + work.schedule().window(work.device(), index, "<-- ERROR HERE");
  try {
    throw;
  } catch (const InternalError& e) {
    throw InternalError(e.what() + where);
  } catch (const c10::Error& e) {
    throw std::runtime_error(e.what_without_backtrace() + where);
  }
}

}  // namespace

void run_action(size_t index, DeviceWork& work, StageSlot& slot, Feed& feed, RunMode mode, Transport& transport,
                ExecStats& stats) {
  const Action& a = work.schedule().device(work.device())[index];
  try {
    const char p = payload(a.kind);
    if (is_send(a.kind)) {
      const int to = peer(a);
      Message m = work.take_result(a.stage, p, a.mb);
      // What travels, and what the traffic figures count, is the codes (straight-through).
      if (slot.codecs && slot.codecs->codes(a.stage, to, p)) {
        // A SEND's own time is its encoding (pipelab simulate replays it; stage_costs.h).
        Timed timed(stats.time[a.kind][static_cast<size_t>(a.stage)]);
        const at::Tensor ids = slot.codecs->needs_ids() ? feed.example_ids(message_unit(work, a, a.stage)) : at::Tensor();
        m = slot.codecs->encode(a.stage, to, p, a.mb, mode == RunMode::Train, std::move(m), ids);
      }
      count_message(stats, a.stage, to, kind_info(a.kind).direction > 0, m);
      stats.bytes[a.kind][static_cast<size_t>(a.stage)] += m.bytes();
      device::Ready ready = m.empty() ? nullptr : device::record_ready(slot.stage->device());
      transport.send(a.stage, to, p, a.mb, {std::move(m), std::move(ready)});
    } else if (is_receive(a.kind)) {
      const int from = peer(a);
      Parcel parcel = transport.receive(a.stage, from, p, a.mb);
      // The message arrives on this stage's device and stream.
      Message& m = parcel.message;
      if (slot.codecs && slot.codecs->codes(from, a.stage, p)) {
        // A RECV's own time is its decoding, not its wait.
        Timed timed(stats.time[a.kind][static_cast<size_t>(a.stage)]);
        const at::Tensor ids = slot.codecs->needs_ids() ? feed.example_ids(message_unit(work, a, from)) : at::Tensor();
        m = slot.codecs->decode(from, a.stage, p, a.mb, mode == RunMode::Train, std::move(m), ids);
      }
      const c10::Device here = slot.stage->device();
      for (at::Tensor& t : m.values) t = device::transfer(t, parcel.ready, here);
      for (at::Tensor& t : m.extra) t = device::transfer(t, parcel.ready, here);
      work.received(a.stage, p, a.mb, std::move(m));
    } else {
      compute(index, a, work, slot, feed, mode, transport, stats);
    }
  } catch (const InternalError&) {
    rethrow_with_window(work, index);
  } catch (const c10::Error&) {
    rethrow_with_window(work, index);
  }
}

}  // namespace pipelab
