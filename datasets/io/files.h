#pragma once
/// Finding and reading dataset files, with errors that say where pipelab looked and how
/// to get the data.
#include <optional>
#include <string>
#include <vector>

#include "core/data/dataset.h"
#include "core/io/input_file.h"  // read_file

namespace pipelab {

/// Where a dataset lives and how a user gets it (for messages).
struct DatasetHome {
  std::string dataset;                  ///< "CIFAR-10"
  std::vector<std::string> candidates;  ///< folders tried under data_dir, in order
  std::string how_to_get;               ///< "download ... from ... and extract it into <data_dir>"
};

/// The dataset's folder: `path` when the user set it, else the first candidate under
/// `context.data_dir` that exists. None found is a UserError listing every place tried.
std::string locate_dataset(const DataContext& context, const std::optional<std::string>& path, const DatasetHome& home);

/// `dir/name`, or `dir/name.gz` when only that exists; neither is a UserError naming
/// both and the dataset's download hint.
std::string require_file(const std::string& dir, const std::string& name, const DatasetHome& home);

/// The bytes of `path`, decompressed when it is gzip data (by content, whatever its name:
/// gzip files are recognised by their first two bytes).
std::string read_maybe_gzip(const std::string& path);

/// The regular files directly in `dir` whose names end with `suffix`, sorted by name.
std::vector<std::string> list_files(const std::string& dir, const std::string& suffix);

}  // namespace pipelab
