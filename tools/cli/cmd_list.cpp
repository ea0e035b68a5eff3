/// pipelab list [KIND [NAME]]: registered components, or the options of one; with
/// --markdown DIR, the whole reference as markdown files (tools/cli/reference.h).
#include <fmt/format.h>

#include <filesystem>

#include "tools/cli/options.h"
#include "tools/cli/reference.h"

namespace pipelab::cli {

int list(const Args& args) {
  po::options_description options("options");
  std::string kind_name, name, markdown;
  options.add_options()("kind", po::value(&kind_name), "scheme, model, dataset, optimizer, lr_schedule, executor or codec")(
      "name", po::value(&name), "a registered name: print its options")(
      "markdown", po::value(&markdown)->value_name("DIR"),
      "write the reference (every component, its options, every command's help) as markdown files into DIR "
      "(docs/reference is made so)");
  po::positional_options_description positional;
  positional.add("kind", 1).add("name", 1);
  po::variables_map vm;
  if (!parse(args, "pipelab list [KIND [NAME]] | --markdown DIR\n\nLists registered components; with KIND and NAME, the options of one\n"
                   "(e.g. pipelab list scheme gpipe).",
             options, positional, vm)) {
    return 0;
  }
  if (!markdown.empty()) {
    std::filesystem::create_directories(markdown);
    for (const auto& [file, text] : reference_markdown()) write_output((std::filesystem::path(markdown) / file).string(), text);
    return 0;
  }
  for (const ComponentKind& k : component_kinds()) {
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
    for (const ComponentKind& k : component_kinds()) {
      known |= kind_name == k.name;
      names.push_back(k.name);
    }
    if (!known) throw UsageError{unknown_name_message("kind", kind_name, names)};
  }
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(list, "registered schemes, models, datasets, optimizers, LR schedules, executors, codecs");
