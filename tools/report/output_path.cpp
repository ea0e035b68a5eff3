#include "tools/report/output_path.h"

#include <filesystem>

namespace pipelab::tools {

std::string sibling_path(const std::string& runs_dir, const std::string& suffix) {
  std::string d = runs_dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (d == "." || d == ".." || d.empty()) {
    d = std::filesystem::absolute(d.empty() ? "." : d).lexically_normal().string();
    while (d.size() > 1 && d.back() == '/') d.pop_back();
  }
  return d + "." + suffix;
}

}  // namespace pipelab::tools
