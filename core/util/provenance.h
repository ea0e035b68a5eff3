#pragma once
/// Where a result came from: pipelab's version and git revision (docs/contributing.md, habit 14: every run
/// writes its resolved config and the git revision next to its results).
#include <string>

namespace pipelab {

/// "0.1.0".
std::string pipelab_version();
/// `git describe --always --dirty` of the source tree now, else the revision it was built from.
std::string git_revision();

}  // namespace pipelab
