#include "core/records/resume_point.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/records/training_state.h"
#include "core/util/error.h"

namespace pipelab {

namespace fs = std::filesystem;

std::string prev_state_path(const std::string& path) {
  return (fs::path(path).parent_path() / "state.prev.pt").string();
}

void save_state_keeping_previous(const std::string& path, const std::function<void(const std::string&)>& save) {
  std::error_code ec;
  if (fs::exists(path)) {
    fs::rename(path, prev_state_path(path), ec);
    if (ec) throw WriteError(fmt::format("{}: cannot keep the previous training state ({}).", path, ec.message()));
  }
  save(path);
}

int agree_resume_epoch(World& world, const std::string& path) {
  const std::string prev = prev_state_path(path);
  const int latest = saved_epochs(path), before = saved_epochs(prev);
  const std::vector<std::vector<int64_t>> all = gather_values(world, {latest, before});
  // The newest epoch that every process holds (states are saved after epochs 1, 2, ...).
  int agreed = 0;
  for (const int64_t candidate : all.front()) {
    const bool everywhere = std::all_of(all.begin(), all.end(), [&](const std::vector<int64_t>& v) {
      return std::find(v.begin(), v.end(), candidate) != v.end();
    });
    if (candidate > agreed && everywhere) agreed = static_cast<int>(candidate);
  }
  std::error_code ec;
  if (agreed == 0) {
    fs::remove(path, ec);
    fs::remove(prev, ec);
  } else if (latest != agreed) {
    // This process got one epoch further than another: its previous state is the one.
    fs::rename(prev, path, ec);
    if (ec) throw WriteError(fmt::format("{}: cannot restore the previous training state ({}).", prev, ec.message()));
  }
  return agreed;
}

}  // namespace pipelab
