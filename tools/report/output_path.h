#pragma once
/// Where `pipelab table` and `pipelab plot` write by default: next to the runs folder,
/// named after it (runs/sweeps/demo -> runs/sweeps/demo.test_acc.final.md).
#include <string>

namespace pipelab::tools {

/// `runs_dir` without trailing slashes (an absolute path for "." and ".."), plus "." and `suffix`.
std::string sibling_path(const std::string& runs_dir, const std::string& suffix);

}  // namespace pipelab::tools
