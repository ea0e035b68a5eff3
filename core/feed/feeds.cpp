#include "core/feed/feeds.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/util/error.h"

namespace pipelab {

double LossTotals::add(const MicroBatchResult& r) {
  const double value = r.loss.item<double>();
  loss += value;
  correct += r.correct.item<int64_t>();
  count += r.count;
  predictions += r.predictions;
  return value;
}

void LossTotals::add(const LossTotals& t) {
  loss += t.loss;
  correct += t.correct;
  count += t.count;
  predictions += t.predictions;
}

double loss_part(double scale, const at::Tensor& y, bool documents, int64_t start, int64_t size) {
  if (!documents) return scale * static_cast<double>(size) / static_cast<double>(y.size(0));
  return scale * static_cast<double>(predicted_targets(y.narrow(0, start, size))) /
         static_cast<double>(predicted_targets(y));
}

namespace {
/// Micro-batch rows [start, start + size) of `batch`; ragged text's without the columns past
/// the last token of any row's documents, but at least `min_length` columns (padded).
Batch rows_of(const Batch& batch, int64_t start, int64_t size, int64_t min_length) {
  Batch b{batch.x.narrow(0, start, size), batch.y.narrow(0, start, size), {}, {}};
  if (batch.ids.defined()) b.ids = batch.ids.narrow(0, start, size);
  if (!batch.documents.defined()) return b;
  b.documents = batch.documents.narrow(0, start, size);
  const int64_t used = b.documents.ge(0).sum(1).max().item<int64_t>(), length = std::max(used, min_length);
  const auto fit = [&](const at::Tensor& t, int64_t fill) {
    if (length <= t.size(1)) return t.narrow(1, 0, length);
    return at::constant_pad_nd(t, {0, length - t.size(1)}, fill);
  };
  b.x = fit(b.x, 0);
  b.y = fit(b.y, kIgnoredTarget);
  b.documents = fit(b.documents, -1);
  return b;
}
}  // namespace

Batch longest_first(const Batch& batch, const std::vector<int64_t>& groups) {
  if (!batch.documents.defined()) return batch;
  const at::Tensor used = batch.documents.ge(0).sum(1);
  std::vector<at::Tensor> orders;
  int64_t start = 0;
  for (const int64_t size : groups) {
    const at::Tensor group = used.narrow(0, start, size);
    orders.push_back(std::get<1>(group.sort(/*stable=*/true, 0, /*descending=*/true)) + start);
    start += size;
  }
  const at::Tensor order = at::cat(orders);
  Batch b{batch.x.index_select(0, order), batch.y.index_select(0, order), {}, batch.documents.index_select(0, order)};
  if (batch.ids.defined()) b.ids = batch.ids.index_select(0, order);
  return b;
}

at::Tensor cast_input(const at::Tensor& x, at::ScalarType dtype) {
  return at::isFloatingType(x.scalar_type()) && x.scalar_type() != dtype ? x.to(dtype) : x;
}

// With one micro-batch the scale is exactly 1 and the Stage skips the multiplication, so
// naive model parallelism stays bit-identical to single-device training.
ChunkFeed::ChunkFeed(const Batch& batch, int chunks, at::ScalarType dtype)
    : ChunkFeed(batch, chunk_sizes(batch.x.size(0), chunks), dtype) {}

ChunkFeed::ChunkFeed(const Batch& batch, const std::vector<int64_t>& sizes, at::ScalarType dtype,
                     int64_t min_length) {
  const bool ragged = batch.documents.defined();
  int64_t start = 0;
  for (const int64_t size : sizes) {
    const Batch b = rows_of(batch, start, size, min_length);
    xs_.push_back(cast_input(b.x, dtype));
    ys_.push_back(b.y);
    if (b.ids.defined()) ids_.push_back(b.ids);
    if (ragged) documents_.push_back(b.documents);
    scales_.push_back(sizes.size() == 1 ? 1.0 : loss_part(1.0, batch.y, ragged, start, size));
    start += size;
  }
}

void ChunkFeed::on_result(int, const MicroBatchResult& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  results_.push_back(r);
}

LossTotals ChunkFeed::totals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  LossTotals t;
  for (const MicroBatchResult& r : results_) t.add(r);
  return t;
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
  if (b.documents.defined()) documents_[mb] = b.documents;
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

std::pair<int, int64_t> LoaderFeed::where(int mb) const {
  if (per_epoch_ == 0) return {loader_.epoch(), mb};
  return {first_epoch_ + static_cast<int>(mb / per_epoch_), mb % per_epoch_};
}

at::Tensor LoaderFeed::documents(int mb) {
  // Fixed-length data has none; asking must not load a batch a stage never reads.
  if (!loader_.has_documents()) return {};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (targets_.count(mb)) {
      const auto it = documents_.find(mb);
      return it == documents_.end() ? at::Tensor() : it->second;
    }
  }
  // A process whose stages read neither inputs nor targets builds the batch for its layout
  // and keeps nothing (no result comes back to it to free it by).
  const auto [epoch, j] = where(mb);
  return loader_.batch_of(epoch, j).documents;
}

at::Tensor LoaderFeed::example_ids(int mb) {
  const auto [epoch, j] = where(mb);
  return loader_.example_ids(epoch, j);
}

void LoaderFeed::on_result(int mb, const MicroBatchResult& r) {
  {
    // Every stage that needs the targets (auxiliary heads, the loss) has read them by the
    // time the loss stage reports: its forward comes after theirs.
    std::lock_guard<std::mutex> lock(mutex_);
    targets_.erase(mb);
    documents_.erase(mb);
  }
  on_result_(mb, r);
}

ReplicaFeed::ReplicaFeed(Feed& inner, int replicas, int units, bool one_process)
    : inner_(inner), replicas_(replicas), units_(units), one_process_(one_process) {
  PIPELAB_ASSERT(replicas > 0 && units > 0, "{} replicas of {} micro-batches", replicas, units);
}

at::Tensor ReplicaFeed::rows(const at::Tensor& t, int r) const {
  const std::vector<int64_t> sizes = chunk_sizes(t.size(0), replicas_);
  // The runner refuses mini-batches smaller than the replicas (every replica needs a share).
  PIPELAB_ASSERT(static_cast<int>(sizes.size()) == replicas_, "a mini-batch of {} examples over {} replicas",
                 t.size(0), replicas_);
  int64_t start = 0;
  for (int i = 0; i < r; ++i) start += sizes[static_cast<size_t>(i)];
  return t.narrow(0, start, sizes[static_cast<size_t>(r)]);
}

void ReplicaFeed::fetch(int k) {
  // The replicas ask for 0, 1, 2, ... each, so the inner feed is asked in order too (its
  // loader prefetches that order), and each mini-batch once.
  for (; fetched_until_ <= k; ++fetched_until_) {
    const int j = fetched_until_;
    const at::Tensor x = inner_.input(j), y = inner_.target(j), documents = inner_.documents(j);
    const double scale = inner_.loss_scale(j);
    int64_t start = 0;
    for (int r = 0; r < replicas_; ++r) {
      Share& s = shares_[r * units_ + j];
      s.input = rows(x, r);
      s.target = rows(y, r);
      if (documents.defined()) s.documents = rows(documents, r);
      s.scale = loss_part(scale, y, documents.defined(), start, s.target.size(0));
      start += s.target.size(0);
    }
  }
}

ReplicaFeed::Share& ReplicaFeed::share(int mb) {
  fetch(mb % units_);
  auto it = shares_.find(mb);
  PIPELAB_ASSERT(it != shares_.end(), "micro-batch {} was asked for after its result", mb);
  return it->second;
}

at::Tensor ReplicaFeed::input(int mb) {
  if (!one_process_) return rows(inner_.input(mb % units_), mb / units_);
  std::lock_guard<std::mutex> lock(mutex_);
  Share& s = share(mb);
  // The input is the share's biggest tensor and only the first stage reads it.
  const at::Tensor x = s.input;
  s.input = at::Tensor();
  PIPELAB_ASSERT(x.defined(), "micro-batch {}'s input was asked for twice", mb);
  return x;
}

at::Tensor ReplicaFeed::target(int mb) {
  if (!one_process_) return rows(inner_.target(mb % units_), mb / units_);
  std::lock_guard<std::mutex> lock(mutex_);
  return share(mb).target;
}

double ReplicaFeed::loss_scale(int mb) {
  if (!one_process_) {
    const at::Tensor y = inner_.target(mb % units_);
    int64_t start = 0;
    for (int r = 0; r < mb / units_; ++r) start += rows(y, r).size(0);
    return loss_part(inner_.loss_scale(mb % units_), y, inner_.documents(mb % units_).defined(), start,
                     rows(y, mb / units_).size(0));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return share(mb).scale;
}

at::Tensor ReplicaFeed::example_ids(int mb) {
  const at::Tensor ids = inner_.example_ids(mb % units_);
  return ids.defined() ? rows(ids, mb / units_) : ids;
}

at::Tensor ReplicaFeed::documents(int mb) {
  if (!one_process_) {
    const at::Tensor d = inner_.documents(mb % units_);
    return d.defined() ? rows(d, mb / units_) : d;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return share(mb).documents;
}

void ReplicaFeed::on_result(int mb, const MicroBatchResult& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  shares_.erase(mb);
  // Across processes the writer hears every replica's results (the others relay theirs).
  Parts& parts = results_[mb % units_];
  parts.results.resize(static_cast<size_t>(replicas_));
  parts.results[static_cast<size_t>(mb / units_)] = r;
  ++parts.in;
  // Reported in order, each once all its shares are in: the sum of the shares' scaled losses
  // (in replica order, so every executor reports the same bits) is the mini-batch's mean loss.
  for (auto it = results_.find(next_); it != results_.end() && it->second.in == replicas_; it = results_.find(next_)) {
    MicroBatchResult sum{at::zeros({}, at::kDouble), at::zeros({}, at::kLong), 0};
    for (const MicroBatchResult& part : it->second.results) {
      sum.loss += part.loss.detach().to(at::kCPU, at::kDouble);
      sum.correct += part.correct.to(at::kCPU, at::kLong);
      sum.count += part.count;
      sum.predictions += part.predictions;
    }
    results_.erase(it);
    inner_.on_result(next_++, sum);
  }
}

}  // namespace pipelab
