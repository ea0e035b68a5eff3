#include "core/train/feeds.h"

#include <ATen/ATen.h>

#include "core/util/error.h"

namespace pipelab {

std::vector<int64_t> chunk_sizes(int64_t n, int chunks) {
  PIPELAB_ASSERT(n > 0 && chunks > 0, "{} examples in {} chunks", n, chunks);
  const int64_t size = (n + chunks - 1) / chunks;
  std::vector<int64_t> out;
  for (int64_t start = 0; start < n; start += size) out.push_back(std::min(size, n - start));
  return out;
}

std::vector<std::vector<int64_t>> replica_chunk_sizes(int64_t n, int replicas, int chunks) {
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(replicas));
  const std::vector<int64_t> shares = chunk_sizes(n, replicas);
  for (size_t r = 0; r < shares.size(); ++r) out[r] = chunk_sizes(shares[r], chunks);
  return out;
}

double LossTotals::add(const MicroBatchResult& r) {
  const double value = r.loss.item<double>();
  loss += value;
  correct += r.correct.item<int64_t>();
  count += r.count;
  return value;
}

void LossTotals::add(const LossTotals& t) {
  loss += t.loss;
  correct += t.correct;
  count += t.count;
}

at::Tensor cast_input(const at::Tensor& x, at::ScalarType dtype) {
  return at::isFloatingType(x.scalar_type()) && x.scalar_type() != dtype ? x.to(dtype) : x;
}

// With one micro-batch the scale is exactly 1 and the Stage skips the multiplication, so
// naive model parallelism stays bit-identical to single-device training.
ChunkFeed::ChunkFeed(const Batch& batch, int chunks, at::ScalarType dtype)
    : ChunkFeed(batch, chunk_sizes(batch.x.size(0), chunks), dtype) {}

ChunkFeed::ChunkFeed(const Batch& batch, const std::vector<int64_t>& sizes, at::ScalarType dtype) {
  const int64_t n = batch.x.size(0);
  if (sizes.size() == 1) {
    xs_.push_back(cast_input(batch.x, dtype));
    ys_.push_back(batch.y);
    scales_.push_back(1.0);
    return;
  }
  int64_t start = 0;
  for (const int64_t size : sizes) {
    xs_.push_back(cast_input(batch.x.narrow(0, start, size), dtype));
    ys_.push_back(batch.y.narrow(0, start, size));
    scales_.push_back(static_cast<double>(size) / static_cast<double>(n));
    start += size;
  }
}

void ChunkFeed::on_result(int, const MicroBatchResult& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  totals_.add(r);
}

LoaderFeed::LoaderFeed(DataLoader& loader, at::ScalarType dtype,
                       std::function<void(int, const MicroBatchResult&)> on_result, int64_t per_epoch,
                       int first_epoch)
    : loader_(loader), dtype_(dtype), on_result_(std::move(on_result)), per_epoch_(per_epoch),
      first_epoch_(first_epoch) {}

at::Tensor LoaderFeed::input(int mb) {
  int64_t j = mb;
  if (per_epoch_ > 0) {
    // The first stage asks in order, so the loader moves on one epoch at a time.
    const int epoch = first_epoch_ + static_cast<int>(mb / per_epoch_);
    if (epoch != epoch_) loader_.start_epoch(epoch_ = epoch);
    j = mb % per_epoch_;
  }
  Batch b = loader_.batch(j);
  std::lock_guard<std::mutex> lock(mutex_);
  targets_[mb] = b.y;
  return cast_input(b.x, dtype_);
}

at::Tensor LoaderFeed::target(int mb) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = targets_.find(mb);
    if (it != targets_.end()) return it->second;
  }
  // A process whose stages never read inputs (the last stage of a multi-process run)
  // loads the batch for its targets itself.
  input(mb);
  std::lock_guard<std::mutex> lock(mutex_);
  return targets_.at(mb);
}

void LoaderFeed::on_result(int mb, const MicroBatchResult& r) {
  {
    // Every stage that needs the targets (auxiliary heads, the loss) has read them by the
    // time the loss stage reports: its forward comes after theirs.
    std::lock_guard<std::mutex> lock(mutex_);
    targets_.erase(mb);
  }
  on_result_(mb, r);
}

}  // namespace pipelab
