#pragma once
/// Datasets hand out batches by example index; loaders decide order and batching.
#include <ATen/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "core/config/registry.h"
#include "core/model/model.h"

namespace pipelab {

/// Inputs x [N, ...] and integer targets y [N]; `ids` (int64 [N]): the examples' indices in
/// their split, where a loader built the batch (per-example codec state, AQ-SGD).
/// `documents` (int64 [N, T], ragged text only): each token's document within its row, -1
/// for padding, whose targets are kIgnoredTarget (core/nn/document_layout.h).
struct Batch {
  at::Tensor x, y, ids, documents;
};

/// An indexable collection of examples.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  /// The examples at `indices`, stacked. `seed` drives any random augmentation of this
  /// batch, so a batch is the same whichever thread builds it and whenever.
  virtual Batch get(const std::vector<int64_t>& indices, uint64_t seed) const = 0;
  /// Whether its batches carry a document layout (Batch::documents: ragged text).
  virtual bool has_documents() const { return false; }
};

/// What loading a dataset gives: the two splits and the shape of the data.
struct DatasetSplits {
  std::shared_ptr<Dataset> train, test;
  DataSpec spec;
  std::string description;  ///< "synthetic teacher, 8192 train / 2048 test, shape [784]"
};

/// Where datasets are looked for, and the run's seed.
struct DataContext {
  std::string data_dir;
  uint64_t seed = 0;
};

/// A registered dataset (`dataset: {type: synthetic, ...}`).
class DatasetFactory : public Component {
 public:
  static constexpr const char* kKind = "dataset";
  /// Loads both splits; a missing or malformed file is a UserError naming it.
  virtual DatasetSplits load(const DataContext& context) const = 0;
};

/// A dataset held as two tensors in memory.
class TensorDataset : public Dataset {
 public:
  TensorDataset(at::Tensor x, at::Tensor y);
  int64_t size() const override;
  Batch get(const std::vector<int64_t>& indices, uint64_t seed) const override;

 private:
  at::Tensor x_, y_;
};

}  // namespace pipelab
