#pragma once
/// `pipelab run --dump-batches N`: the first N steps' micro-batches as the stages saw them
/// (inputs, targets, document layout, example ids), written to a safetensors file that
/// Python's `safetensors` reads, so that a result can be checked against reference code fed
/// the same batches. A feed decorator records what the stages ask for; nothing else changes.
#include <map>
#include <mutex>
#include <string>

#include "core/exec/executor.h"
#include "core/io/pt_file.h"

namespace pipelab {

/// Collects the micro-batches of the first `steps` steps.
class BatchDump {
 public:
  BatchDump(std::string path, int64_t steps) : path_(std::move(path)), steps_(steps) {}
  bool on() const { return steps_ > 0; }
  /// Whether step `step` is one of those dumped.
  bool wants(int64_t step) const { return step < steps_; }
  /// Records `tensor` as `part` of unit `mb` of step `step` ("step3.mb1.x"); the first record
  /// of a name wins (every stage asks alike).
  void record(int64_t step, int mb, const char* part, const at::Tensor& tensor);
  /// Writes what was recorded (atomically); a failed write is a WriteError.
  void write() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int64_t steps_ = 0;
  mutable std::mutex mutex_;
  std::map<std::string, at::Tensor> tensors_;
};

/// A feed that records what the stages read of `inner` into `dump`, for step `step` of a
/// flushed pipeline (each unit a micro-batch of it), or, for a pipeline that runs on, with
/// unit u as step `step` + u.
class DumpFeed : public Feed {
 public:
  DumpFeed(Feed& inner, BatchDump& dump, int64_t step, bool units_are_steps)
      : inner_(inner), dump_(dump), step_(step), units_are_steps_(units_are_steps) {}
  at::Tensor input(int mb) override { return kept(mb, "x", inner_.input(mb)); }
  at::Tensor target(int mb) override { return kept(mb, "y", inner_.target(mb)); }
  double loss_scale(int mb) override { return inner_.loss_scale(mb); }
  void on_result(int mb, const MicroBatchResult& r) override { inner_.on_result(mb, r); }
  at::Tensor example_ids(int mb) override { return kept(mb, "example_ids", inner_.example_ids(mb)); }
  nn::SequenceSegment segment(int mb) override { return inner_.segment(mb); }
  at::Tensor documents(int mb) override { return kept(mb, "documents", inner_.documents(mb)); }

 private:
  at::Tensor kept(int mb, const char* part, at::Tensor t);
  Feed& inner_;
  BatchDump& dump_;
  int64_t step_;
  bool units_are_steps_;
};

}  // namespace pipelab
