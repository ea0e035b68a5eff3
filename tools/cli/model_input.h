#pragma once
/// The example shape a model is defined for, shared by `pipelab describe` and `pipelab
/// simulate`: from --input-shape/--classes/--token-ids, or from loading the dataset as
/// `pipelab run` would.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <sstream>

#include "core/experiment/experiment.h"
#include "tools/cli/options.h"

namespace pipelab::cli {

/// "3,32,32" or "[3, 32, 32]" -> {3, 32, 32}; `flag` names the option in errors.
inline std::vector<int64_t> parse_shape(std::string text, const std::string& flag = "--input-shape") {
  for (char& c : text) {
    if (c == '[' || c == ']' || c == ',') c = ' ';
  }
  std::istringstream in(text);
  std::vector<int64_t> shape;
  int64_t d = 0;
  while (in >> d) {
    if (d <= 0) throw UsageError{fmt::format("{}: sizes must be positive, got {}", flag, d)};
    shape.push_back(d);
  }
  if (!in.eof() || shape.empty()) {
    throw UsageError{fmt::format("{}: expected sizes such as 3,32,32 (one example, no batch)", flag)};
  }
  // One example's values, bounded before a model is built for it (2^31: far beyond any real
  // example, and the largest count a LibTorch kernel's 32-bit index handles).
  double values = 1;
  for (const int64_t d : shape) values *= static_cast<double>(d);
  if (values > 2147483648.0) {
    throw UsageError{fmt::format("{}: one example of {:.3g} values; give at most 2^31 (2147483648)", flag, values)};
  }
  return shape;
}

/// --classes, --token-ids and --target-shape describe --input-shape's examples: without it they
/// would be ignored (a UsageError naming them).
inline void check_input_flags(const po::variables_map& vm) {
  std::vector<std::string> given;
  if (vm.count("classes") && !vm["classes"].defaulted()) given.push_back("--classes");
  for (const char* flag : {"token-ids", "target-shape"}) {
    if (vm.count(flag)) given.push_back(std::string("--") + flag);
  }
  if (!vm.count("input-shape") && !given.empty()) {
    throw UsageError{fmt::format("{} describe{} the examples of --input-shape, which is not given, so {} would be "
                                 "ignored. Fix: add --input-shape (one example's shape, e.g. --input-shape 3,32,32), or "
                                 "drop {}",
                                 fmt::join(given, ", "), given.size() == 1 ? "s" : "", given.size() == 1 ? "it" : "they",
                                 given.size() == 1 ? "it" : "them")};
  }
}

/// The data the model is defined for: from the command line, or from loading the dataset
/// as `pipelab run` would (the same data folder rules, core/assembly/run_builder.cpp).
inline DataSpec data_spec(const Experiment& e, const po::variables_map& vm) {
  check_input_flags(vm);
  if (vm.count("input-shape")) {
    DataSpec spec;
    spec.input_shape = parse_shape(vm["input-shape"].as<std::string>());
    spec.classes = vm["classes"].as<int64_t>();
    if (spec.classes < 1 || spec.classes > 100000000) throw UsageError{"--classes: give a number from 1 to 10^8"};
    spec.integer_input = vm.count("token-ids") > 0;
    if (vm.count("target-shape")) spec.target_shape = parse_shape(vm["target-shape"].as<std::string>(), "--target-shape");
    return spec;
  }
  return e.dataset->load(e.data_context()).spec;
}

/// The example flags as given, for messages: "--input-shape 8, --classes 10 (its default)".
inline std::string example_flags_text(const po::variables_map& vm) {
  std::vector<std::string> parts{"--input-shape " + vm["input-shape"].as<std::string>()};
  parts.push_back(fmt::format("--classes {}{}", vm["classes"].as<int64_t>(), vm["classes"].defaulted() ? " (its default)" : ""));
  if (vm.count("token-ids")) parts.push_back("--token-ids");
  if (vm.count("target-shape")) parts.push_back("--target-shape " + vm["target-shape"].as<std::string>());
  return fmt::format("{}", fmt::join(parts, ", "));
}

/// Runs `fn` (defining or profiling the model). Where the examples came from the flags, a
/// mistake it meets is the flags' (the model reads other examples), not the file's: a
/// UsageError naming them, LibTorch's own complaint included.
template <class Fn>
auto with_example_flags(const po::variables_map& vm, Fn&& fn) -> decltype(fn()) {
  if (!vm.count("input-shape")) return fn();
  const auto blame = [&vm](const std::string& why) {
    return UsageError{fmt::format("{}: the model does not read such examples: {}. Fix: give the flags the examples "
                                  "the model reads (--classes, --token-ids for word ids, --target-shape for a target "
                                  "at each position), or drop --input-shape to use the file's dataset",
                                  example_flags_text(vm), why)};
  };
  try {
    return fn();
  } catch (const UserError& e) {
    const std::string what = e.what();
    throw blame(what.substr(0, what.find(" Fix:")));
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    throw blame("LibTorch says: " + what.substr(0, what.find('\n')));
  }
}

/// The options data_spec reads.
inline void add_input_options(po::options_description& options) {
  options.add_options()("input-shape", po::value<std::string>(),
                        "one example's shape, e.g. 3,32,32, instead of loading the dataset (with --classes, --token-ids)")(
      "classes", po::value<int64_t>()->default_value(10), "classes, with --input-shape")(
      "token-ids", "examples are int64 word ids, with --input-shape (e.g. --input-shape 200 --classes 2 --token-ids)")(
      "target-shape", po::value<std::string>(),
      "one example's targets when there is one per position, with --input-shape (a language model: "
      "--input-shape 64 --classes 10000 --token-ids --target-shape 64)");
}

}  // namespace pipelab::cli
