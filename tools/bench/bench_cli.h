#pragma once
/// The command line of a benchmark program: one place for `--help` and for a bad option
/// (the message and the options on stderr, exit code 2, never an uncaught exception).
#include <boost/program_options.hpp>

#include <iostream>
#include <optional>

namespace pipelab::bench {

/// Parses `argv` into `vm`. Returns the exit code when the program should stop now (0 after
/// printing `desc` for --help, 2 after a bad option), nothing when it should go on.
inline std::optional<int> parse_command_line(int argc, char** argv, const boost::program_options::options_description& desc,
                                             boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << e.what() << "\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  return std::nullopt;
}

}  // namespace pipelab::bench
