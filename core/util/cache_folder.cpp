#include "core/util/cache_folder.h"

#include <cstdlib>

namespace pipelab {

std::string cache_folder() {
  if (const char* dir = std::getenv("PIPELAB_CACHE"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/pipelab";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/pipelab";
  return ".pipelab-cache";
}

}  // namespace pipelab
