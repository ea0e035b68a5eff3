#pragma once
/// The `pipelab` subcommands. Each parses its own arguments (Boost.Program_options) and
/// returns an exit code; errors are exceptions that main() maps to exit codes
/// (2 for a user's mistake).
#include <string>
#include <vector>

namespace pipelab::cli {

using Args = std::vector<std::string>;

int run(const Args& args);
int list(const Args& args);
int schedule(const Args& args);

/// Thrown for a bad command line; main() prints it with the command's usage, exit code 2.
struct UsageError {
  std::string message;
};

}  // namespace pipelab::cli
