#pragma once
/// The reference a user reads in docs/reference/, generated from what the program registers
/// (`pipelab list --markdown DIR`), so it cannot drift from the code: every scheme, model,
/// dataset, optimizer, LR schedule, executor and codec with its options, the experiment's own
/// sections, and every command's --help. A test regenerates it and compares.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/config/fields.h"

namespace pipelab::cli {

/// One kind of registered component (`scheme:`, `model:`, ...).
struct ComponentKind {
  std::string name;   ///< "scheme", the experiment's section
  std::string title;  ///< "Schemes"
  std::function<std::vector<std::pair<std::string, std::string>>()> entries;  ///< (name, description), sorted
  std::function<std::vector<FieldInfo>(const std::string&)> options;
};

/// Every kind, in the order `pipelab list` prints them.
const std::vector<ComponentKind>& component_kinds();

/// The reference's files: (file name, markdown), README.md first.
std::vector<std::pair<std::string, std::string>> reference_markdown();

}  // namespace pipelab::cli
