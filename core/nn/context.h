#pragma once
/// Thread-local state of the action a stage is running, scoped with RAII guards
/// (docs/contributing.md, habit 12). Each stage runs on one thread at a time, so thread-local
/// state keeps concurrent stages apart under the threaded executor.
#include <ATen/core/Generator.h>

namespace pipelab::nn {

/// True while a stage recomputes a checkpointed forward inside its backward. Batch norm
/// then leaves running statistics alone (docs/schemes.md Q29: torchgpipe would count
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
