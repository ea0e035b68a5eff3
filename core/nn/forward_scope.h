#pragma once
/// What the forward a thread runs reads besides its inputs, in one place: whether it
/// recomputes, under CUDA-graph capture, the generator its dropout draws from, the sequence
/// segment it computes and its micro-batch's document layout. The stage's actions set these
/// through the scoped guards of context.h, sequence_segment.h and document_layout.h (each
/// restores what it replaced); model blocks read them through those headers' accessors.
/// One thread-local value for all of them: each stage runs on one thread at a time, so a
/// thread's scope keeps concurrent stages apart under the threaded executor (torchgpipe keeps
/// its ambient state in one threading.local the same way).
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace pipelab::nn {

struct SequenceSegment;

struct ForwardScope {
  bool recomputing = false;               ///< a checkpointed forward run again in its backward
  bool graphed = false;                   ///< captured into a CUDA graph
  at::Generator* generator = nullptr;     ///< what dropout draws from (null: the default)
  bool* drew = nullptr;                   ///< set when something drew from `generator`
  const SequenceSegment* segment = nullptr;  ///< the sequence segment computed (null: whole sequences)
  const at::Tensor* documents = nullptr;     ///< the micro-batch's document layout (null: none)
};

/// This thread's scope.
ForwardScope& forward_scope();

}  // namespace pipelab::nn
