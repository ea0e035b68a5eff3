#include "datasets/io/files.h"

#include <algorithm>
#include <filesystem>

#include "core/util/error.h"
#include "core/util/names.h"
#include "datasets/io/gzip.h"

namespace fs = std::filesystem;

namespace pipelab {

std::string locate_dataset(const DataContext& context, const std::optional<std::string>& path,
                           const DatasetHome& home) {
  if (path) {
    if (fs::is_directory(*path)) return *path;
    throw UserError(fmt::format("{}: folder '{}' (dataset option `path`) does not exist; {}", home.dataset, *path,
                                home.how_to_get));
  }
  std::vector<std::string> tried;
  for (const std::string& c : home.candidates) {
    const std::string dir = (fs::path(context.data_dir) / c).string();
    if (fs::is_directory(dir)) return dir;
    tried.push_back(dir);
  }
  throw UserError(
      fmt::format("{} not found: looked for the folder {} (data_dir is '{}', from run.data_dir, else "
                  "$PIPELAB_DATA_DIR, else ./data); {}, or set the dataset's `path` to its folder",
                  home.dataset, join(tried, " and "), context.data_dir, home.how_to_get));
}

std::string require_file(const std::string& dir, const std::string& name, const DatasetHome& home) {
  const fs::path plain = fs::path(dir) / name;
  if (fs::is_regular_file(plain)) return plain.string();
  const fs::path gz = fs::path(dir) / (name + ".gz");
  if (fs::is_regular_file(gz)) return gz.string();
  throw UserError(
      fmt::format("{}: file {} (or {}.gz) not found in {}; {}", home.dataset, name, name, dir, home.how_to_get));
}

std::string read_maybe_gzip(const std::string& path) {
  std::string bytes = read_file(path);
  return looks_gzipped(bytes) ? gunzip(bytes, path) : bytes;
}

std::vector<std::string> list_files(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_regular_file() && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(it->path().string());
    }
  }
  if (ec) throw UserError(fmt::format("cannot list the folder {}: {}", dir, ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace pipelab
