#pragma once
/// The `pipelab` subcommands. Each lives in its own cmd_*.cpp, parses its own arguments
/// (Boost.Program_options), returns an exit code, and registers itself with one line:
///
///   PIPELAB_COMMAND(run, "train one experiment file");
///
/// Errors are exceptions that main() maps to exit codes (2 for a user's mistake).
#include <map>
#include <string>
#include <vector>

namespace pipelab::cli {

using Args = std::vector<std::string>;
using CommandFn = int (*)(const Args&);

struct Command {
  std::string summary;
  CommandFn fn;
};

/// name -> command, sorted by name.
std::map<std::string, Command>& commands();
bool add_command(const std::string& name, const std::string& summary, CommandFn fn);

/// Thrown for a bad command line; main() prints it with the command's usage, exit code 2.
struct UsageError {
  std::string message;
};

}  // namespace pipelab::cli

/// Defines `int pipelab::cli::<name>(const Args&)` elsewhere in the file and registers it.
#define PIPELAB_COMMAND(name, summary)                                                 \
  [[maybe_unused]] static const bool pipelab_command_registered_##name =             \
      ::pipelab::cli::add_command(#name, summary, &::pipelab::cli::name)
