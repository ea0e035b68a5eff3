#pragma once
/// Thread-local state of the action a stage is running (one value: forward_scope.h), scoped with RAII guards
/// (docs/contributing.md, habit 12). Each stage runs on one thread at a time, so thread-local
/// state keeps concurrent stages apart under the threaded executor.
#include <ATen/core/Generator.h>

namespace pipelab::nn {

/// True while a stage recomputes a checkpointed forward inside its backward. Batch norm
/// then leaves running statistics alone (docs/schemes.md, "Quirks": torchgpipe would count
/// such a micro-batch twice).
bool is_recomputing();

/// Marks the current thread as recomputing for its lifetime.
class RecomputeGuard {
 public:
  RecomputeGuard();
  ~RecomputeGuard();
  RecomputeGuard(const RecomputeGuard&) = delete;
  RecomputeGuard& operator=(const RecomputeGuard&) = delete;

 private:
  bool previous_;
};

/// True while a stage runs a training forward that `run.cuda_graphs` captures, or warms up
/// for capture (core/stage/stage_graphs.h). A captured forward replays the same kernels on
/// every call, so a block whose work depends on host-side state that changes from call to
/// call (deferred batch norm's per-mini-batch moments) must refuse to run, naming itself.
bool is_graphed();

/// Marks the current thread's forward as graphed for its lifetime (when `on`).
class GraphedGuard {
 public:
  explicit GraphedGuard(bool on = true);
  ~GraphedGuard();
  GraphedGuard(const GraphedGuard&) = delete;
  GraphedGuard& operator=(const GraphedGuard&) = delete;

 private:
  bool previous_;
};

/// The generator random blocks (dropout) draw from on this thread; null = LibTorch's default.
/// Asking for it counts as drawing (GeneratorScope's `drew`).
at::Generator* current_generator();

/// Makes `gen` the current generator for its lifetime. A stage installs each block's own
/// generator around that block, so masks depend only on the block and on the order of its
/// micro-batches, never on the partition, the executor or thread timing. `drew`, when given,
/// is set if anything asks for the generator meanwhile: a stage snapshots, for a forward it
/// will recompute, only the generators its blocks draw from.
class GeneratorScope {
 public:
  explicit GeneratorScope(at::Generator* gen, bool* drew = nullptr);
  ~GeneratorScope();
  GeneratorScope(const GeneratorScope&) = delete;
  GeneratorScope& operator=(const GeneratorScope&) = delete;

 private:
  at::Generator* previous_;
  bool* previous_drew_;
};

}  // namespace pipelab::nn
