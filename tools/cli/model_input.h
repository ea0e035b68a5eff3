#pragma once
/// The example shape a model is defined for, shared by `pipelab describe` and `pipelab
/// simulate`: from --input-shape/--classes/--token-ids, or from loading the dataset as
/// `pipelab run` would.
#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

#include "core/train/experiment.h"
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

/// The data the model is defined for: from the command line, or from loading the dataset
/// as `pipelab run` would (the same data folder rules, core/train/run_builder.cpp).
inline DataSpec data_spec(const Experiment& e, const po::variables_map& vm) {
  if (vm.count("input-shape")) {
    DataSpec spec;
    spec.input_shape = parse_shape(vm["input-shape"].as<std::string>());
    spec.classes = vm["classes"].as<int64_t>();
    if (spec.classes < 1 || spec.classes > 100000000) throw UsageError{"--classes: give a number from 1 to 10^8"};
    spec.integer_input = vm.count("token-ids") > 0;
    if (vm.count("target-shape")) spec.target_shape = parse_shape(vm["target-shape"].as<std::string>(), "--target-shape");
    return spec;
  }
  if (vm.count("token-ids") || vm.count("target-shape") || !vm["classes"].defaulted()) {
    throw UsageError{"--classes, --token-ids and --target-shape go with --input-shape"};
  }
  DataContext context;
  context.seed = static_cast<uint64_t>(e.run.seed);
  const char* env = std::getenv("PIPELAB_DATA_DIR");
  context.data_dir = e.run.data_dir ? *e.run.data_dir : env ? env : "data";
  return e.dataset->load(context).spec;
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
