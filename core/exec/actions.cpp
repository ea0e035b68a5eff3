#include "core/exec/actions.h"

#include <chrono>
#include <map>

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

/// Records one action of one stage in ExecStats::actions (when tracing).
class Traced {
 public:
  Traced(ExecStats& stats, int stage, const Action& a, const c10::Device& device)
      : stats_(stats.trace ? &stats : nullptr), stage_(stage) {
    if (!stats_) return;
    record_.kind = a.kind;
    record_.mb = a.mb;
    record_.device_start_mark = device::mark(device);
    device_ = device;
    record_.start = seconds();
  }
  ~Traced() {
    if (!stats_) return;
    record_.end = seconds();
    record_.device_end_mark = device::mark(device_);
    stats_->actions[static_cast<size_t>(stage_)].push_back(std::move(record_));
  }

 private:
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - stats_->origin).count(); }
  ExecStats* stats_;
  int stage_;
  c10::Device device_ = c10::kCPU;
  ActionRecord record_;
};

}  // namespace

void ExecStats::resolve_device_times() {
  // Every mark is first timed against one reference mark of its device, then shifted so
  // that the earliest is 0.
  std::map<c10::DeviceIndex, device::Mark> first;
  std::vector<std::pair<ActionRecord*, c10::DeviceIndex>> cuda;
  for (auto& stage : actions) {
    for (ActionRecord& a : stage) {
      if (!a.device_start_mark || !a.device_end_mark) continue;
      const c10::DeviceIndex d = device::mark_device(a.device_start_mark);
      if (!first.count(d)) first[d] = a.device_start_mark;
      cuda.emplace_back(&a, d);
    }
  }
  std::map<c10::DeviceIndex, double> earliest;
  for (auto& [a, d] : cuda) {
    a->device_start = device::seconds_between(first[d], a->device_start_mark);
    a->device_end = device::seconds_between(first[d], a->device_end_mark);
    earliest[d] = std::min(earliest.count(d) ? earliest[d] : a->device_start, a->device_start);
  }
  for (auto& [a, d] : cuda) {
    a->device_start -= earliest[d];
    a->device_end -= earliest[d];
  }
}

void ExecStats::reset(int stages) {
  const size_t n = static_cast<size_t>(stages);
  forward.assign(n, {});
  head.assign(n, {});
  backward.assign(n, {});
  update.assign(n, {});
  const size_t edges = n > 0 ? n - 1 : 0;
  bytes_forward.assign(edges, 0);
  bytes_backward.assign(edges, 0);
  messages_forward.assign(edges, 0);
  messages_backward.assign(edges, 0);
  wall_seconds = 0;
  actions.assign(n, {});
  origin = std::chrono::steady_clock::now();
}

void begin_run(std::vector<StageSlot>& slots, int micro_batches, RunMode mode) {
  for (StageSlot& slot : slots) {
    if (!slot.stage) continue;
    slot.stage->set_training(mode == RunMode::Train);
    if (mode == RunMode::Train) slot.policy->begin(*slot.stage, micro_batches);
  }
}

void end_run(std::vector<StageSlot>& slots, RunMode mode) {
  if (mode != RunMode::Train) return;
  for (StageSlot& slot : slots) {
    if (slot.stage) slot.policy->end(*slot.stage);
  }
}

void count_message(ExecStats& stats, int from, int to, const Message& m) {
  if (m.empty()) return;
  const size_t edge = static_cast<size_t>(std::min(from, to));
  auto& bytes = to > from ? stats.bytes_forward : stats.bytes_backward;
  auto& count = to > from ? stats.messages_forward : stats.messages_backward;
  bytes[edge] += m.bytes();
  ++count[edge];
}

Message run_forward(StageSlot& slot, int mb, Message in, bool from_feed, Feed& feed, RunMode mode, ExecStats& stats) {
  Stage& stage = *slot.stage;
  Timed timed(stats.forward[static_cast<size_t>(stage.index())]);
  if (from_feed || stage.is_first()) in.value = feed.input(mb);
  PIPELAB_ASSERT(in.value.defined(), "stage {}: forward of micro-batch {} has no input", stage.index(), mb);
  in.value = device::transfer(in.value, nullptr, stage.device());
  const bool target_needed = mode == RunMode::Eval ? stage.is_last() : stage.needs_target();
  const at::Tensor target = target_needed ? feed.target(mb).to(stage.device(), true) : at::Tensor();
  ForwardResult result;
  if (mode == RunMode::Eval) {
    result = stage.evaluate(in.value, target);
  } else {
    slot.policy->before_forward(stage, mb, in);
    ForwardOptions options;
    options.checkpoint = slot.policy->checkpoint(mb);
    options.target = target;
    options.loss_scale = feed.loss_scale(mb);
    result = stage.forward(mb, in.value, options);
  }
  Message out{result.activation, {}, in.tag};
  if (mode == RunMode::Train) slot.policy->after_forward(stage, mb, out);
  if (stage.is_last()) {
    feed.on_result(mb, {result.loss, result.correct, result.count});
    return {};
  }
  return out;
}

Message run_head(StageSlot& slot, int mb, ExecStats& stats) {
  Timed timed(stats.head[static_cast<size_t>(slot.stage->index())]);
  return slot.policy->head(*slot.stage, mb);
}

Message run_backward(StageSlot& slot, int mb, const std::vector<Message>& in, ExecStats& stats) {
  Stage& stage = *slot.stage;
  Timed timed(stats.backward[static_cast<size_t>(stage.index())]);
  slot.policy->before_backward(stage, mb);
  Message out = slot.policy->backward(stage, mb, in);
  slot.policy->after_backward(stage, mb);
  return out;
}

void run_update(StageSlot& slot, ExecStats& stats) {
  Timed timed(stats.update[static_cast<size_t>(slot.stage->index())]);
  slot.policy->update(*slot.stage);
}

void run_action(const Schedule& s, int r, const Action& a, StageSlot& slot, Feed& feed, RunMode mode,
                Transport& transport, ExecStats& stats) {
  const int last = s.stages() - 1;
  const bool pipeline = s.links.forward == Links::Forward::Pipeline;
  const c10::Device here = slot.stage->device();
  const auto send = [&](int to, Message m) {
    count_message(stats, r, to, m);
    device::Ready ready = m.empty() ? nullptr : device::record_ready(here);
    transport.send(r, to, a.kind, a.mb, {std::move(m), std::move(ready)});
  };
  // A message arrives on this stage's device and stream (device::transfer).
  const auto receive = [&](int from, ActionKind kind) {
    Parcel p = transport.receive(r, from, kind, a.mb);
    Message& m = p.message;
    m.value = device::transfer(m.value, p.ready, here);
    for (at::Tensor& t : m.extra) t = device::transfer(t, p.ready, here);
    return std::move(m);
  };
  switch (a.kind) {
    case ActionKind::Forward: {
      const bool receives = pipeline && r > 0;
      Message in = receives ? receive(r - 1, a.kind) : Message{};
      Message out;
      {
        Traced traced(stats, r, a, here);
        out = run_forward(slot, a.mb, std::move(in), !pipeline, feed, mode, stats);
      }
      if (pipeline && r < last) send(r + 1, std::move(out));
      break;
    }
    case ActionKind::Head:
    case ActionKind::Backward: {
      std::vector<Message> in;
      if (a.kind == ActionKind::Backward && r < last) {
        for (const ActionKind k : s.links.backward_inputs) in.push_back(receive(r + 1, k));
      }
      Message out;
      {
        Traced traced(stats, r, a, here);
        out = a.kind == ActionKind::Head ? run_head(slot, a.mb, stats) : run_backward(slot, a.mb, in, stats);
      }
      if (r > 0 && s.links.sends_back(a.kind)) send(r - 1, std::move(out));
      break;
    }
    case ActionKind::Update:
      if (s.links.synchronized_updates) transport.update_barrier(r);
      {
        Traced traced(stats, r, a, here);
        run_update(slot, stats);
      }
      break;
  }
}

}  // namespace pipelab
