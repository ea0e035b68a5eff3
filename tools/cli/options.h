#pragma once
/// Shared Boost.Program_options plumbing for the subcommands.
#include <boost/program_options.hpp>

#include <iostream>

#include "tools/cli/commands.h"

namespace pipelab::cli {

namespace po = boost::program_options;

/// Parses `args` against `options` (+ positionals); prints help and returns false for
/// --help; a bad command line becomes a UsageError.
inline bool parse(const Args& args, const std::string& usage, po::options_description& options,
                  const po::positional_options_description& positional, po::variables_map& vm) {
  options.add_options()("help,h", "show this help");
  try {
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: " << usage << "\n\n" << options << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError{e.what()};
  }
  return true;
}

}  // namespace pipelab::cli
