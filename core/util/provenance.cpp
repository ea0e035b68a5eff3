#include "core/util/provenance.h"

#include <cstdio>
#include <memory>

namespace pipelab {

std::string pipelab_version() { return "0.1.0"; }

std::string git_revision() {
  static const std::string revision = [] {
    std::string out;
    const std::string cmd = std::string("git -C '") + PIPELAB_SOURCE_DIR +
                            "' describe --always --dirty --abbrev=12 2>/dev/null";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
    if (pipe) {
      char buf[128];
      while (std::fgets(buf, sizeof buf, pipe.get())) out += buf;
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out.empty() ? std::string(PIPELAB_GIT_REVISION) : out;
  }();
  return revision;
}

}  // namespace pipelab
