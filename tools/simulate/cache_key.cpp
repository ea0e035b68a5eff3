#include "tools/simulate/cache_key.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

namespace pipelab::sim {

namespace fs = std::filesystem;

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

void fingerprint(const YAML::Node& node, std::string& out) {
  if (node.IsScalar()) {
    const std::string v = node.Scalar();
    out += v + ";";
    std::error_code ec;
    if (!v.empty() && fs::is_regular_file(v, ec)) {
      out += fmt::format("{}@{};", fs::file_size(v, ec), fs::last_write_time(v, ec).time_since_epoch().count());
    }
  } else if (node.IsSequence() || node.IsMap()) {
    out += node.IsMap() ? "{" : "[";
    for (const auto& kv : node) {
      if (node.IsMap()) {
        out += kv.first.Scalar() + ":";
        fingerprint(kv.second, out);
      } else {
        fingerprint(kv, out);
      }
    }
    out += node.IsMap() ? "}" : "]";
  }
}

std::string build_fingerprint() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return fmt::format("{}@{}", fs::file_size(self, ec), fs::last_write_time(self, ec).time_since_epoch().count());
}

}  // namespace pipelab::sim
