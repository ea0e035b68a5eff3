/// `pipelab`: the command-line front end. Only this file turns exceptions into exit codes
/// (docs/style.md, habit 6): 0 success, 2 a user's mistake (config, file, command line),
/// 1 anything else.
#include <c10/util/Exception.h>

#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "core/config/config_node.h"
#include "core/util/allocator.h"
#include "core/util/names.h"
#include "tools/cli/commands.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*fn)(const pipelab::cli::Args&);
};

const Command kCommands[] = {
    {"run", "train one experiment file: pipelab run FILE [--set key.path=value ...]", pipelab::cli::run},
    {"list", "registered schemes, models, datasets, optimizers, LR schedules, executors", pipelab::cli::list},
    {"schedule", "print a scheme's per-stage action table and bubble fraction", pipelab::cli::schedule},
};

void usage(std::ostream& out) {
  out << "pipelab — pipeline-parallel and model-parallel DNN training\n\n"
         "usage: pipelab <command> [options]    (pipelab <command> --help for details)\n\ncommands:\n";
  for (const Command& c : kCommands) out << fmt::format("  {:<10} {}\n", c.name, c.summary);
  out << "\nexample: pipelab run experiments/quickstart.yaml\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    usage(std::cout);
    return argc < 2 ? 2 : 0;
  }
  pipelab::keep_freed_memory();
  const std::string name = argv[1];
  const pipelab::cli::Args args(argv + 2, argv + argc);
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.fn(args);
    } catch (const pipelab::cli::UsageError& e) {
      std::cerr << "pipelab " << name << ": " << e.message << "\n(see: pipelab " << name << " --help)\n";
      return 2;
    } catch (const pipelab::UserError& e) {
      std::cerr << "error: " << e.what() << "\n";
      return 2;
    } catch (const c10::Error& e) {
      std::cerr << "error from LibTorch: " << e.what_without_backtrace() << "\n";
      return 1;
    } catch (const std::exception& e) {
      std::cerr << "internal error: " << e.what() << "\n";
      return 1;
    }
  }
  std::vector<std::string> names;
  for (const Command& c : kCommands) names.push_back(c.name);
  std::cerr << "error: " << pipelab::unknown_name_message("command", name, names) << "\n\n";
  usage(std::cerr);
  return 2;
}
