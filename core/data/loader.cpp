#include "core/data/loader.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <numeric>

#include "core/util/error.h"
#include "core/util/seed.h"

namespace pipelab {

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  PIPELAB_ASSERT(options_.batch_size > 0, "batch size {}", options_.batch_size);
  start_epoch(0);
}

int64_t DataLoader::batches() const {
  const int64_t n = dataset_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::start_epoch(int epoch) {
  epoch_ = epoch;
  const int64_t n = dataset_->size();
  order_.resize(static_cast<size_t>(n));
  if (!options_.shuffle) {
    std::iota(order_.begin(), order_.end(), int64_t{0});
    return;
  }
  at::Generator gen = at::detail::createCPUGenerator(mix_seed(options_.seed, 0x5EED5u, static_cast<uint64_t>(epoch)));
  const at::Tensor perm = at::randperm(n, gen, at::kLong);
  const int64_t* p = perm.data_ptr<int64_t>();
  order_.assign(p, p + n);
}

Batch DataLoader::batch(int64_t j) const {
  PIPELAB_ASSERT(j >= 0 && j < batches(), "batch {} of {}", j, batches());
  const auto start = std::chrono::steady_clock::now();
  const int64_t b = options_.batch_size;
  const auto first = order_.begin() + j * b;
  const auto last = order_.begin() + std::min<int64_t>((j + 1) * b, static_cast<int64_t>(order_.size()));
  Batch out = dataset_->get(std::vector<int64_t>(first, last),
                            mix_seed(options_.seed, static_cast<uint64_t>(epoch_), static_cast<uint64_t>(j)));
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

double DataLoader::take_wait_seconds() {
  const double w = wait_seconds_;
  wait_seconds_ = 0;
  return w;
}

}  // namespace pipelab
