#pragma once
/// A fixed subset of a dataset (`dataset.limit`, `dataset.test_limit`): `count` examples
/// chosen by a seeded permutation, kept in the dataset's own order, so that a short run on a
/// real dataset sees every class (datasets stored class by class would otherwise give the
/// first class only) and every run of an experiment the same examples.
#include <memory>

#include "core/data/dataset.h"

namespace pipelab {

/// The first `count` of a permutation of `dataset`'s indices drawn with `seed` (0 or at least
/// the size: `dataset` itself).
std::shared_ptr<Dataset> subset(std::shared_ptr<Dataset> dataset, int64_t count, uint64_t seed);

}  // namespace pipelab
