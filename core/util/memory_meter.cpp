#include "core/util/memory_meter.h"

#include <c10/util/Logging.h>

#include <algorithm>

namespace pipelab {
namespace {

// The tag and scope of this thread's allocations, one thread-local value rather than state
// in the meter: a thread runs one action at a time, whichever meter is installed, and the
// allocator reports each allocation on the thread that made it.
struct Charging {
  int tag = MemoryMeter::kNoTag;
  uint64_t scope = 0;
};
thread_local Charging t_charging;

}  // namespace

MemoryMeter::Scope::Scope(MemoryMeter* meter, int tag) : meter_(meter) {
  if (!meter_) return;
  {
    std::lock_guard<std::mutex> lock(meter_->mutex_);
    id_ = meter_->next_scope_++;
    meter_->open_scopes_[id_] = 0;
    Usage& u = meter_->tags_[tag];
    u.window_peak = u.current;
    start_ = u.current;
  }
  tag_ = tag;
  previous_tag_ = t_charging.tag;
  previous_scope_ = t_charging.scope;
  t_charging = {tag, id_};
}

MemoryMeter::Scope::~Scope() {
  if (!meter_) return;
  t_charging = {previous_tag_, previous_scope_};
  std::lock_guard<std::mutex> lock(meter_->mutex_);
  meter_->open_scopes_.erase(id_);
}

int64_t MemoryMeter::Scope::retained() const {
  if (!meter_) return 0;
  std::lock_guard<std::mutex> lock(meter_->mutex_);
  const auto it = meter_->open_scopes_.find(id_);
  return it == meter_->open_scopes_.end() ? 0 : it->second;
}

int64_t MemoryMeter::Scope::peak_rise() const {
  if (!meter_) return 0;
  std::lock_guard<std::mutex> lock(meter_->mutex_);
  return meter_->tags_[tag_].window_peak - start_;
}

MemoryMeter::Install::Install(const std::shared_ptr<MemoryMeter>& meter) {
  if (meter) guard_.emplace(c10::DebugInfoKind::PROFILER_STATE, meter);
}

MemoryMeter::QuietAllocatorLog::QuietAllocatorLog(const std::shared_ptr<MemoryMeter>& meter) {
  if (!meter) return;
  previous_ = FLAGS_caffe2_log_level;
  FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, 2);  // 2: ERROR
}

MemoryMeter::QuietAllocatorLog::~QuietAllocatorLog() {
  if (previous_) FLAGS_caffe2_log_level = *previous_;
}

void MemoryMeter::release(const Block& b) {
  tags_[b.tag].current -= b.bytes;
  const auto g = group_of_.find(b.tag);
  if (g != group_of_.end()) groups_[g->second].current -= b.bytes;
  const auto scope = open_scopes_.find(b.scope);
  if (scope != open_scopes_.end()) scope->second -= b.bytes;
}

void MemoryMeter::reportMemoryUsage(void* ptr, int64_t alloc_size, size_t /*total_allocated*/,
                                    size_t /*total_reserved*/, c10::Device device) {
  // Host memory and GPU memory: a stage on a GPU allocates its activations there (the
  // caching allocator reports each tensor's block as it is handed out and given back, on
  // the thread that asks; 2026-11-26's GPU run saw 8 bytes per GPU stage without this).
  if ((device.type() != c10::DeviceType::CPU && device.type() != c10::DeviceType::CUDA) || alloc_size == 0) return;
  // Some LibTorch versions report a CUDA block by the address of their own record of it, a
  // host address: the device type keeps the two kinds of key apart (the low bit is free,
  // both being aligned).
  const uintptr_t key = reinterpret_cast<uintptr_t>(ptr) | (device.is_cuda() ? 1u : 0u);
  std::lock_guard<std::mutex> lock(mutex_);
  if (alloc_size < 0) {
    // Unknown blocks were allocated before the meter or on a thread without it.
    const auto it = blocks_.find(key);
    if (it == blocks_.end()) return;
    release(it->second);
    blocks_.erase(it);
    return;
  }
  // A live entry at a new allocation's address was freed where nobody reported it (on a
  // thread without the meter): settle it now.
  const auto stale = blocks_.find(key);
  if (stale != blocks_.end()) release(stale->second);
  const Block b{alloc_size, t_charging.tag, t_charging.scope};
  blocks_[key] = b;
  Usage& u = tags_[b.tag];
  u.current += b.bytes;
  u.peak = std::max(u.peak, u.current);
  u.window_peak = std::max(u.window_peak, u.current);
  const auto g = group_of_.find(b.tag);
  if (g != group_of_.end()) {
    Usage& gu = groups_[g->second];
    gu.current += b.bytes;
    gu.peak = std::max(gu.peak, gu.current);
  }
  const auto scope = open_scopes_.find(b.scope);
  if (scope != open_scopes_.end()) scope->second += b.bytes;
}

void MemoryMeter::group(int tag, int group) {
  std::lock_guard<std::mutex> lock(mutex_);
  group_of_[tag] = group;
}

MemoryMeter::Usage MemoryMeter::group_usage(int group) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = groups_.find(group);
  return it == groups_.end() ? Usage{} : it->second;
}

MemoryMeter::Usage MemoryMeter::usage(int tag) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = tags_.find(tag);
  return it == tags_.end() ? Usage{} : it->second;
}

}  // namespace pipelab
