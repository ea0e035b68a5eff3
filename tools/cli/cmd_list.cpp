/// pipelab list [KIND [NAME]]: registered components, or the options of one.
#include <fmt/format.h>

#include "core/compress/codec.h"
#include "core/data/dataset.h"
#include "core/exec/executor.h"
#include "core/model/model.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/scheme/scheme.h"
#include "tools/cli/options.h"

namespace pipelab::cli {
namespace {

struct Kind {
  const char* name;
  std::function<std::vector<std::pair<std::string, std::string>>()> entries;
  std::function<std::vector<FieldInfo>(const std::string&)> options;
};

template <class Base>
Kind kind(const char* name) {
  return {name,
          [] {
            std::vector<std::pair<std::string, std::string>> out;
            for (const auto& [n, e] : Registry<Base>::get().entries()) out.emplace_back(n, e.description);
            return out;
          },
          [](const std::string& n) { return Registry<Base>::get().at(n).options(); }};
}

const std::vector<Kind>& kinds() {
  static const std::vector<Kind> k{kind<Scheme>("scheme"),         kind<ModelFactory>("model"),
                                   kind<DatasetFactory>("dataset"), kind<OptimizerFactory>("optimizer"),
                                   kind<LrSchedule>("lr_schedule"), kind<Executor>("executor"),
                                   kind<Codec>("codec")};
  return k;
}

}  // namespace

int list(const Args& args) {
  po::options_description options("options");
  std::string kind_name, name;
  options.add_options()("kind", po::value(&kind_name), "scheme, model, dataset, optimizer, lr_schedule, executor or codec")(
      "name", po::value(&name), "a registered name: print its options");
  po::positional_options_description positional;
  positional.add("kind", 1).add("name", 1);
  po::variables_map vm;
  if (!parse(args, "pipelab list [KIND [NAME]]\n\nLists registered components; with KIND and NAME, the options of one\n"
                   "(e.g. pipelab list scheme gpipe).",
             options, positional, vm)) {
    return 0;
  }
  for (const Kind& k : kinds()) {
    if (!kind_name.empty() && kind_name != k.name) continue;
    if (!name.empty()) {
      fmt::print("{} {} options:\n", k.name, name);
      const auto rows = k.options(name);
      if (rows.empty()) fmt::print("  (none)\n");
      for (const FieldInfo& f : rows) {
        fmt::print("  {:<24} {}{}\n      {}\n", f.key, f.type,
                   f.required ? "  (required)" : "  default: " + f.default_value, f.doc);
      }
      return 0;
    }
    fmt::print("{}:\n", k.name);
    for (const auto& [n, d] : k.entries()) fmt::print("  {:<14} {}\n", n, d);
  }
  if (!kind_name.empty()) {
    bool known = false;
    std::vector<std::string> names;
    for (const Kind& k : kinds()) {
      known |= kind_name == k.name;
      names.push_back(k.name);
    }
    if (!known) throw UsageError{unknown_name_message("kind", kind_name, names)};
  }
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(list, "registered schemes, models, datasets, optimizers, LR schedules, executors, codecs");
