#pragma once
/// Memory per pipeline stage, measured from LibTorch's own allocators' reporting: host
/// memory for a stage on the CPU, the CUDA caching allocator's blocks for one on a GPU.
///
/// c10's DefaultCPUAllocator (and CUDA's caching allocator, per tensor block, whether or
/// not it is cached) reports every allocation and free (a negative size) to the
/// thread-local c10::MemoryReportingInfoBase in the PROFILER_STATE debug-info slot whenever
/// that object says memoryProfilingEnabled() — the hook PyTorch's profiler uses for
/// `profile_memory=True`. A MemoryMeter is such an object: it charges each
/// allocation to the current thread's tag (the stage whose action runs, kNoTag outside
/// actions) and each free to the tag its allocation had, whichever metered thread frees it
/// (an activation made by stage s is often freed by stage s+1's backward).
///
/// What it does not see:
/// - threads without an Install: their allocations are not reported, and neither are their
///   frees (c10 only reports on a thread whose PROFILER_STATE slot asks for it). When such a
///   free's address is later allocated again on a metered thread, the old block is settled
///   then (an address cannot be live twice), so counts drift only until the address is reused;
/// - devices other than the CPU and CUDA GPUs (their reports are ignored);
/// - the CUDA caching allocator's cached but unused segments (its reserved bytes, which
///   costs.json records apart);
/// - memory not from LibTorch's allocators (BLAS workspaces, the heap of std containers);
/// - blocks allocated before the meter was installed (the weights): frees of unknown blocks
///   are ignored (c10 may log one warning per 1000 of them: "Memory block of unknown size").
/// It takes the PROFILER_STATE slot for the threads it is installed on, so it cannot run
/// together with LibTorch's profiler on those threads.
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace pipelab {

class MemoryMeter : public c10::MemoryReportingInfoBase {
 public:
  static constexpr int kNoTag = -1;
  /// Stage s's host memory (the activations OFFLOAD moved off its device) is tag
  /// host_tag(s), grouped per device under host_group(d): apart from the device's own.
  static constexpr int host_tag(int stage) { return (1 << 20) + stage; }
  static constexpr int host_group(int device) { return -2 - device; }

  /// Current and peak bytes of one tag.
  struct Usage {
    int64_t current = 0, peak = 0;
    int64_t window_peak = 0;  ///< the peak since the tag's latest Scope began
  };

  /// While alive, this thread's allocations are charged to `tag`, and the bytes allocated in
  /// the scope and not yet freed are counted (retained()). Nests; restores the outer tag.
  class Scope {
   public:
    Scope(MemoryMeter* meter, int tag);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    /// Bytes allocated in this scope (on this thread) that are still alive now.
    int64_t retained() const;
    /// How far the tag's current bytes rose above their level at the scope's start, at most,
    /// so far: an action's transient need (its temporaries, a gradient it allocates).
    int64_t peak_rise() const;

   private:
    MemoryMeter* meter_;
    int previous_tag_ = kNoTag;
    uint64_t previous_scope_ = 0;
    uint64_t id_ = 0;
    int tag_ = kNoTag;
    int64_t start_ = 0;  ///< the tag's current bytes at the start
  };

  /// While alive, `meter` (may be null: then nothing) receives this thread's CPU allocator
  /// reports. Nests with other debug-info guards as c10::DebugInfoGuard does.
  class Install {
   public:
    explicit Install(const std::shared_ptr<MemoryMeter>& meter);
    Install(const Install&) = delete;
    Install& operator=(const Install&) = delete;

   private:
    std::optional<c10::DebugInfoGuard> guard_;
  };

  /// While alive and given a meter, c10's own log (LOG(WARNING); not TORCH_WARN, whose
  /// warnings still show) prints errors only: freeing a block older than the meter on a
  /// metered thread (the weights, a batch) makes c10/core/CPUAllocator.cpp log "Memory block
  /// of unknown size was allocated before the profiling started", expected here and
  /// alarming to read. Process-wide, so one per run, around the metered epoch.
  class QuietAllocatorLog {
   public:
    explicit QuietAllocatorLog(const std::shared_ptr<MemoryMeter>& meter);
    ~QuietAllocatorLog();
    QuietAllocatorLog(const QuietAllocatorLog&) = delete;
    QuietAllocatorLog& operator=(const QuietAllocatorLog&) = delete;

   private:
    std::optional<int> previous_;
  };

  void reportMemoryUsage(void* ptr, int64_t alloc_size, size_t total_allocated, size_t total_reserved,
                         c10::Device device) override;
  bool memoryProfilingEnabled() const override { return true; }

  /// The usage of `tag` so far (zeros for a tag that never allocated).
  Usage usage(int tag) const;

  /// Counts `tag`'s bytes also in `group`'s (a device's stages: their sum over time, whose
  /// peak is not the sum of their peaks). From now on; a tag is in one group at most.
  void group(int tag, int group);
  /// The usage of `group` so far (zeros for a group that never allocated).
  Usage group_usage(int group) const;

 private:
  struct Block {
    int64_t bytes = 0;
    int tag = kNoTag;
    uint64_t scope = 0;  ///< the Scope it was allocated in (0: none)
  };
  void release(const Block& b);  // under mutex_

  mutable std::mutex mutex_;
  std::unordered_map<uintptr_t, Block> blocks_;  ///< by address, the low bit set for a GPU's
  std::map<int, Usage> tags_;
  std::map<int, int> group_of_;  ///< tag -> group
  std::map<int, Usage> groups_;
  std::unordered_map<uint64_t, int64_t> open_scopes_;  ///< scope id -> live bytes it allocated
  uint64_t next_scope_ = 1;
};

}  // namespace pipelab
