#pragma once
/// Renaming a published state dict's tensors onto a model's (`init.names`): torchvision's
/// `resnet18` and pipelab's `resnet` have the same layout under other names ("layer1.0.bn1"
/// is "layer1_0.conv1.bn"). A rule is a regular expression over a whole name and its
/// rewrite; the first rule that matches a name rewrites it, and a name no rule matches stays.
/// The expressions are RE2's (Debian's libre2-dev): linear time whatever the pattern, so a
/// hostile pattern cannot hang a run as a backtracking engine's can.
#include <string>
#include <vector>

#include "core/config/fields.h"
#include "core/io/pt_file.h"

namespace pipelab {

/// `pattern` matches a whole name; `rewrite` may use \1..\9 for its groups.
struct NameRule {
  std::string pattern, rewrite;
};

/// "" when `rule` compiles and its rewrite names only groups the pattern has; else the problem.
std::string check_name_rule(const NameRule& rule);

/// `tensors` with every name rewritten by the first rule matching it whole; a tensor whose
/// rewrite is empty is dropped (a published checkpoint's part the model does not build, such
/// as an auxiliary classifier) and its name added to `dropped`. Two tensors that end up with
/// one name are a UserError naming both and `file`.
TensorDict rename_tensors(const TensorDict& tensors, const std::vector<NameRule>& rules, const std::string& file,
                          std::vector<std::string>* dropped = nullptr);

/// `init.names`: none (the file's names are the model's), a published naming the model knows
/// (`torchvision`, `huggingface`: ModelDef::published_names), the user's own rules
/// ({pattern: rewrite, ...} in order), or a list of both: `[{'fc\..*': ''}, torchvision]`
/// tries the user's rules before the naming's (here: drop the published head), and rules
/// after it only where the naming matched nothing.
struct TensorNames {
  std::string preset = "none";
  std::vector<NameRule> rules;
  size_t preset_at = 0;  ///< the published naming's rules go before rules[preset_at]
  bool renames() const { return preset != "none" || !rules.empty(); }
  /// The rules in the order they are tried, with `published` (the naming's) in its place.
  std::vector<NameRule> with(const std::vector<NameRule>& published) const;
};

template <>
struct ConfigValue<TensorNames> {
  static std::string type() {
    return "none, torchvision, huggingface, {pattern: rewrite, ...}, or a list of a naming and rule mappings";
  }
  static TensorNames read(const ConfigNode& n);
  static YAML::Node write(const TensorNames& names);
};

}  // namespace pipelab
