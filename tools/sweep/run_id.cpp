#include "tools/sweep/run_id.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>

#include "tools/sweep/key_paths.h"

namespace pipelab::tools {
namespace {

/// Ids longer than this (a sweep over long lists or file paths) are shortened, with a
/// hash of the whole id keeping them apart: file systems limit a name to 255 bytes.
constexpr size_t kMaxId = 100;

std::string tail(const std::vector<std::string>& segments, size_t k) {
  std::vector<std::string> last(segments.end() - static_cast<std::ptrdiff_t>(std::min(k, segments.size())),
                                segments.end());
  std::string out;
  for (const std::string& s : last) out += (out.empty() ? "" : ".") + s;
  return out;
}

uint32_t fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

/// The value of `path` among `leaves`, if present.
std::optional<std::string> lookup(const std::vector<Leaf>& leaves, const std::string& path) {
  for (const Leaf& l : leaves) {
    if (l.first == path) return l.second;
  }
  return std::nullopt;
}

}  // namespace

std::string sanitize_for_path(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string("._+=,-").find(c) != std::string::npos;
    if (!ok) c = '_';
  }
  return out;
}

std::vector<std::string> make_run_ids(const std::vector<std::vector<Leaf>>& cells,
                                      std::vector<std::vector<Leaf>>* labels) {
  // Key paths in the order the cells assign them: a path first seen in a later cell goes
  // right after the path before it in that cell (`chunks`, only set with `type: gpipe`,
  // stays next to `type`). Then those whose value is not the same everywhere.
  std::vector<std::string> paths;
  for (const auto& cell : cells) {
    size_t next = 0;  // where a path new in this cell goes
    for (const Leaf& l : cell) {
      size_t at = static_cast<size_t>(std::find(paths.begin(), paths.end(), l.first) - paths.begin());
      if (at == paths.size()) {
        at = next;
        paths.insert(paths.begin() + static_cast<std::ptrdiff_t>(at), l.first);
      }
      next = at + 1;
    }
  }
  std::vector<std::string> varying;
  for (const std::string& p : paths) {
    std::optional<std::string> first = lookup(cells.front(), p);
    for (const auto& cell : cells) {
      if (lookup(cell, p) != first) {
        varying.push_back(p);
        break;
      }
    }
  }
  // Short names: the fewest trailing segments that tell the varying paths apart.
  std::map<std::string, std::string> name;
  for (const std::string& p : varying) {
    const std::vector<std::string> segs = split_key_path(p);
    for (size_t k = 1;; ++k) {
      const std::string mine = tail(segs, k);
      const bool unique = std::none_of(varying.begin(), varying.end(), [&](const std::string& q) {
        return q != p && tail(split_key_path(q), k) == mine;
      });
      if (unique || k >= segs.size()) {
        name[p] = mine;
        break;
      }
    }
  }
  std::vector<std::string> ids;
  std::map<std::string, int> seen;
  if (labels) labels->clear();
  for (const auto& cell : cells) {
    std::string id;
    std::vector<Leaf> mine;
    for (const std::string& p : varying) {
      const std::optional<std::string> v = lookup(cell, p);
      if (!v) continue;
      id += (id.empty() ? "" : ",") + sanitize_for_path(name[p] + "=" + *v);
      mine.emplace_back(name[p], *v);
    }
    if (id.empty()) id = "run";
    if (id.size() > kMaxId) {
      // Whole key=value pairs where they fit (never a value cut in two: "lr=0.~hash"); one
      // pair longer than the room is cut where the room ends.
      const size_t room = kMaxId - 10;
      const size_t pair_end = id.rfind(',', room);
      const size_t cut = pair_end == std::string::npos || pair_end == 0 ? room : pair_end;
      id = fmt::format("{}~{:08x}", id.substr(0, cut), fnv1a(id));
    }
    const int n = ++seen[id];
    if (n > 1) id += fmt::format("~{}", n);
    ids.push_back(id);
    if (labels) labels->push_back(mine);
  }
  return ids;
}

}  // namespace pipelab::tools
