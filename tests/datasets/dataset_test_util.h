#pragma once
/// Small helpers for the dataset tests: load a dataset section against a data folder,
/// write files in real formats, fetch a whole split.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <string>

#include "core/data/dataset.h"
#include "tests/support/helpers.h"

namespace pipelab::testing {

/// Creates `path`'s folders and writes `bytes` to it.
inline void write_file(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  write_text(path, bytes);
}

/// Loads the dataset section `yaml` with `data_dir` as the data folder.
inline DatasetSplits load_dataset(const std::string& yaml, const std::string& data_dir) {
  auto source = std::make_shared<ConfigSource>("data.yaml");
  DataContext context;
  context.data_dir = data_dir;
  return Registry<DatasetFactory>::get().create(ConfigNode(YAML::Load(yaml), source, "dataset"))->load(context);
}

/// The UserError message loading `yaml` gives ("" if it loads).
inline std::string load_error(const std::string& yaml, const std::string& data_dir) {
  return user_error([&] { load_dataset(yaml, data_dir); });
}

/// Every example of `d`, in order, as one batch built with `seed`.
inline Batch whole(const Dataset& d, uint64_t seed = 0) {
  std::vector<int64_t> all(static_cast<size_t>(d.size()));
  std::iota(all.begin(), all.end(), int64_t{0});
  return d.get(all, seed);
}

/// True when `text` contains `part`; gtest prints both otherwise.
inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

}  // namespace pipelab::testing
