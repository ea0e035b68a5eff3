#pragma once
/// Shared Boost.Program_options plumbing for the subcommands.
#include <boost/program_options.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "core/io/atomic_file.h"
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

/// The help of --preset, which every command that takes --set takes too.
inline constexpr const char* kPresetHelp =
    "apply the file's presets.NAME settings, e.g. cpu-mini (a seed experiment in miniature); your --set values win";

/// What a command's --preset holds until the flag is given (an empty name is a mistake,
/// not the absence of one).
inline const std::string kNoPreset(1, '\0');

/// `sets` with --preset NAME added as preset=NAME (core/config/presets.h): the file's
/// settings of that name, applied after the --set values and under them.
inline std::vector<std::string> with_preset(std::vector<std::string> sets, const std::string& preset) {
  if (preset == kNoPreset) return sets;
  if (preset.empty()) {
    throw UserError("--preset: the name is empty. Fix: name one of the file's presets (its presets: section), or "
                    "drop --preset");
  }
  sets.push_back("preset=" + preset);
  return sets;
}

/// `value` of flag `flag`, which must be finite and in [lo, hi]; a UsageError naming the
/// flag otherwise (Boost reads "nan" and "inf" as numbers).
inline double checked_flag(const std::string& flag, double value, double lo, double hi) {
  if (!std::isfinite(value) || value < lo || value > hi) {
    throw UsageError{fmt::format("{} {}: give a finite number in [{:g}, {:g}]", flag, value, lo, hi)};
  }
  return value;
}

/// An output file given by `flag`: a folder there (or a path ending in '/') is a UsageError
/// naming the flag, before anything is computed, rather than a failed write at the end.
inline void check_output_file(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (!path.empty() && (path.back() == '/' || std::filesystem::is_directory(path, ec))) {
    throw UsageError{fmt::format("{} {}: a folder; give a file's path in it, e.g. {}/out", flag, path,
                                 path.back() == '/' ? path.substr(0, path.size() - 1) : path)};
  }
}

/// Writes `text` to `path` (an output a command was asked for), making its folder first,
/// and says so.
inline void write_output(const std::string& path, const std::string& text) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!folder.empty()) std::filesystem::create_directories(folder, ec);
  if (ec) {
    throw UserError(
        fmt::format("cannot create the folder {}: {}. Fix: give a writable path", folder.string(), ec.message()));
  }
  write_file_atomic(path, text);
  fmt::print("wrote {}\n", path);
}

/// True when `text` is wholly a finite number (strtod's syntax), stored in `out`.
inline bool parse_finite(const std::string& text, double& out) {
  if (text.empty() || text.find_first_of(" \t") != std::string::npos) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(out);
}

/// The items of a `sep`-separated flag value; an empty item ("a,,b", ",") is a UsageError
/// naming the flag.
inline std::vector<std::string> flag_list(const std::string& flag, const std::string& text, char sep = ',') {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  for (;;) {
    const size_t end = std::min(text.find(sep, start), text.size());
    if (end == start) {
      throw UsageError{fmt::format("{} '{}': an empty item between '{}'s; list items separated by single '{}'s", flag,
                                   text, sep, sep)};
    }
    out.push_back(text.substr(start, end - start));
    if (end == text.size()) return out;
    start = end + 1;
  }
}

/// `--tokens L1,L2,...`: the length of each micro-batch's sequences (ragged text), at least 1
/// each; anything else is a UsageError naming the flag.
inline std::vector<double> token_lengths(const std::string& text) {
  std::vector<double> out;
  for (const std::string& item : flag_list("--tokens", text)) {
    double l = 0;
    if (!parse_finite(item, l) || l < 1) {
      throw UsageError{fmt::format("--tokens {}: '{}' is no length; give each micro-batch's tokens per sequence, "
                                   "numbers of at least 1 separated by commas (e.g. 412,388,501)",
                                   text, item)};
    }
    out.push_back(l);
  }
  return out;
}

}  // namespace pipelab::cli
