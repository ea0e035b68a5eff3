#include "core/feed/batch_dump.h"

#include <fmt/format.h>

#include "core/io/safetensors.h"

namespace pipelab {

void BatchDump::record(int64_t step, int mb, const char* part, const at::Tensor& tensor) {
  if (!tensor.defined() || !wants(step)) return;
  const std::string name = fmt::format("step{}.mb{}.{}", step, mb, part);
  std::lock_guard<std::mutex> lock(mutex_);
  // A copy on the CPU, contiguous: what safetensors stores, apart from the run's tensor.
  if (!tensors_.count(name)) tensors_.emplace(name, tensor.detach().to(at::kCPU).contiguous().clone());
}

void BatchDump::write() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TensorDict out(tensors_.begin(), tensors_.end());
  save_safetensors(path_, out,
                   {{"format", "pipelab-batches"},
                    {"keys", "step<S>.mb<M>.<x|y|documents|example_ids>: step S's micro-batch M as the stages read it"}});
}

at::Tensor DumpFeed::kept(int mb, const char* part, at::Tensor t) {
  const int64_t step = units_are_steps_ ? step_ + mb : step_;
  dump_.record(step, units_are_steps_ ? 0 : mb, part, t);
  return t;
}

}  // namespace pipelab
