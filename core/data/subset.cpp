#include "core/data/subset.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

namespace pipelab {
namespace {

class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<Dataset> inner, std::vector<int64_t> indices)
      : inner_(std::move(inner)), indices_(std::move(indices)) {}
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Batch get(const std::vector<int64_t>& indices, uint64_t seed) const override {
    std::vector<int64_t> mapped;
    mapped.reserve(indices.size());
    for (const int64_t i : indices) mapped.push_back(indices_.at(static_cast<size_t>(i)));
    return inner_->get(mapped, seed);
  }
  bool has_documents() const override { return inner_->has_documents(); }

 private:
  std::shared_ptr<Dataset> inner_;
  std::vector<int64_t> indices_;
};

}  // namespace

std::shared_ptr<Dataset> subset(std::shared_ptr<Dataset> dataset, int64_t count, uint64_t seed) {
  if (count <= 0 || count >= dataset->size()) return dataset;
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor order = at::randperm(dataset->size(), g, at::kLong).narrow(0, 0, count);
  std::vector<int64_t> indices(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + count);
  std::sort(indices.begin(), indices.end());
  return std::make_shared<Subset>(std::move(dataset), std::move(indices));
}

}  // namespace pipelab
