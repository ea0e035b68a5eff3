/// `pipelab`: the command-line front end. Only this file turns exceptions into exit codes
/// (docs/contributing.md, habit 6): 0 success, 2 a user's mistake (config, file, command line),
/// 1 anything else.
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/config/config_node.h"
#include "core/util/allocator.h"
#include "core/util/names.h"
#include "core/util/error.h"
#include "core/util/error_text.h"
#include "core/config/plugins.h"
#include "core/util/provenance.h"
#include "tools/cli/commands.h"

namespace pipelab::cli {

std::map<std::string, Command>& commands() {
  static std::map<std::string, Command> table;
  return table;
}

bool add_command(const std::string& name, const std::string& summary, CommandFn fn) {
  commands()[name] = {summary, fn};
  return true;
}

}  // namespace pipelab::cli

namespace {

void usage(std::ostream& out) {
  out << "pipelab — pipeline-parallel and model-parallel DNN training\n\n"
         "usage: pipelab <command> [options]    (pipelab <command> --help, or pipelab help <command>, for details;\n"
         "       pipelab --version; any command takes --plugin FILE, a shared library that registers schemes,\n"
         "       models, datasets or codecs, and --debug, which keeps internal detail in error messages)\n\n"
         "commands:\n";
  for (const auto& [name, c] : pipelab::cli::commands()) out << fmt::format("  {:<10} {}\n", name, c.summary);
  out << "\nexample: pipelab run experiments/quickstart.yaml\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version"))) {
    std::cout << fmt::format("pipelab {} (git {}), LibTorch {}\n", pipelab::pipelab_version(), pipelab::git_revision(),
                             TORCH_VERSION);
    return 0;
  }
  // `pipelab help CMD` is `pipelab CMD --help`.
  std::vector<char*> with_help;
  if (argc == 3 && !std::strcmp(argv[1], "help") && pipelab::cli::commands().count(argv[2])) {
    static char help_flag[] = "--help";
    with_help = {argv[0], argv[2], help_flag};
    argc = 3;
    argv = with_help.data();
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    usage(std::cout);
    return argc < 2 ? 2 : 0;
  }
  pipelab::keep_freed_memory();
  const std::string name = argv[1];
  // `--plugin FILE` (any command, repeatable) and a parent pipelab's PIPELAB_PLUGINS load
  // shared libraries whose registrations the command then sees (core/config/plugins.h).
  pipelab::cli::Args args;
  std::vector<std::string> plugin_files;
  // `--debug` (any command): messages keep their internal detail (source locations, assert
  // text, stack frames), here and in the processes this one starts.
  const char* debug_env = std::getenv("PIPELAB_DEBUG");
  bool debug = debug_env && *debug_env && std::strcmp(debug_env, "0") != 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--debug") {
      debug = true;
      ::setenv("PIPELAB_DEBUG", "1", 1);
    } else if (a == "--plugin" && i + 1 < argc) {
      plugin_files.push_back(argv[++i]);
    } else if (a.rfind("--plugin=", 0) == 0) {
      plugin_files.push_back(a.substr(9));
    } else {
      args.push_back(argv[i]);
    }
  }
  const auto& table = pipelab::cli::commands();
  const auto it = table.find(name);
  if (it == table.end()) {
    std::vector<std::string> names;
    for (const auto& kv : table) names.push_back(kv.first);
    std::cerr << "error: " << pipelab::unknown_name_message("command", name, names) << "\n\n";
    usage(std::cerr);
    return 2;
  }
  // Messages quote user input: control bytes are shown escaped, never sent to the terminal.
  const auto shown = [debug](const std::string& text) {
    return pipelab::printable(debug ? text : pipelab::without_internals(text));
  };
  try {
    // pipelab's own registrations take distinct names (tests/core/registry_test.cpp).
    PIPELAB_ASSERT(pipelab::registration_conflicts().empty(), "names registered twice: {}",
                   fmt::join(pipelab::registration_conflicts(), ", "));
    pipelab::load_inherited_plugins();
    for (const std::string& f : plugin_files) pipelab::load_plugin(f);
    return it->second.fn(args);
  } catch (const pipelab::cli::UsageError& e) {
    std::cerr << "pipelab " << name << ": " << shown(e.message) << "\n(see: pipelab " << name << " --help)\n";
    return 2;
  } catch (const pipelab::UserError& e) {
    std::cerr << "error: " << shown(e.what()) << "\n";
    return 2;
  } catch (const pipelab::WriteError& e) {
    std::cerr << "error: " << shown(e.what()) << "\n";
    return 1;
  } catch (const pipelab::PeerError& e) {
    std::cerr << "error: " << shown(e.what()) << "\n";
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    std::cerr << "error: " << pipelab::printable(pipelab::filesystem_message(e)) << (debug ? std::string(" (") + e.what() + ")" : "")
              << "\n";
    return pipelab::filesystem_error_is_users(e) ? 2 : 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory: pipelab could not allocate what this command needs. Fix: use smaller sizes "
                 "(model widths, dataset samples, batch sizes) or a machine with more memory.\n";
    return 1;
  } catch (const pipelab::InternalError& e) {
    std::cerr << "internal error: " << shown(e.what())
              << (debug ? "" : " (a bug in pipelab: run again with --debug to see where, and report it)") << "\n";
    return 1;
  } catch (const c10::Error& e) {
    std::cerr << "error from LibTorch: " << (debug ? pipelab::printable(e.what()) : shown(e.what_without_backtrace()))
              << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << shown(e.what()) << "\n";
    return 1;
  }
}
