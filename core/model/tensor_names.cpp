#include "core/model/tensor_names.h"

#include <re2/re2.h>

#include <map>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "core/config/config_node.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

/// Names and rules are short; the bound keeps a hostile pattern's compiled program small.
constexpr int64_t kMaxPatternMemory = 1 << 20;

std::unique_ptr<RE2> compile(const std::string& pattern) {
  RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(kMaxPatternMemory);
  return std::make_unique<RE2>(pattern, o);
}

}  // namespace

std::string check_name_rule(const NameRule& rule) {
  const auto re = compile(rule.pattern);
  if (!re->ok()) return fmt::format("'{}' is not a regular expression: {}", rule.pattern, re->error());
  std::string why;
  if (!re->CheckRewriteString(rule.rewrite, &why)) return fmt::format("rewrite '{}': {}", rule.rewrite, why);
  return "";
}

TensorDict rename_tensors(const TensorDict& tensors, const std::vector<NameRule>& rules, const std::string& file,
                          std::vector<std::string>* dropped) {
  std::vector<std::unique_ptr<RE2>> compiled;
  for (const NameRule& r : rules) compiled.push_back(compile(r.pattern));
  TensorDict out;
  std::map<std::string, std::string> origin;  // new name -> the file's name
  for (const auto& [name, tensor] : tensors) {
    std::string renamed = name;
    for (size_t i = 0; i < rules.size(); ++i) {
      // The pattern matches the whole name, and the rewrite takes the groups of that match:
      // RE2::Replace would take the first match anywhere, which a lazy group ends early.
      const RE2& re = *compiled[i];
      const int groups = 1 + (re.ok() ? re.NumberOfCapturingGroups() : 0);
      std::vector<re2::StringPiece> found(static_cast<size_t>(groups));
      if (!re.ok() || !re.Match(name, 0, name.size(), RE2::ANCHOR_BOTH, found.data(), groups)) continue;
      renamed.clear();
      re.Rewrite(&renamed, rules[i].rewrite, found.data(), groups);
      break;
    }
    if (renamed.empty()) {
      if (dropped) dropped->push_back(name);
      continue;
    }
    const auto [it, fresh] = origin.emplace(renamed, name);
    if (!fresh) {
      throw UserError(fmt::format("{}: init.names maps both '{}' and '{}' to '{}'. Fix: make the rules tell them apart",
                                  file, it->second, name, renamed));
    }
    out.emplace_back(renamed, tensor);
  }
  return out;
}

TensorNames ConfigValue<TensorNames>::read(const ConfigNode& n) {
  TensorNames names;
  if (n.yaml().IsScalar()) {
    const std::string preset = n.text();
    if (preset != "none" && preset != "torchvision" && preset != "huggingface") {
      n.fail(fmt::format("'{}' is not a naming", preset),
             "use none, torchvision, huggingface, or rules {pattern: rewrite, ...}");
    }
    names.preset = preset;
    return names;
  }
  if (!n.yaml().IsMap() || n.yaml().size() == 0) {
    n.fail("init.names is neither a naming nor rules", "use none, torchvision, huggingface, or {pattern: rewrite, ...}");
  }
  for (const auto& kv : n.yaml()) {
    const ConfigNode key(kv.first, n.source(), n.path());
    const ConfigNode value(kv.second, n.source(), fmt::format("{}.{}", n.path(), kv.first.Scalar()));
    if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
      key.fail("a rule is not 'pattern: rewrite'", "write each rule as a quoted pattern and its rewrite, e.g. "
                                                   "'conv1\\.(.*)': 'stem.conv.\\1'");
    }
    const NameRule rule{kv.first.Scalar(), kv.second.Scalar()};
    const std::string problem = check_name_rule(rule);
    if (!problem.empty()) value.fail(problem, "write an RE2 expression and a rewrite using its groups \\1..\\9");
    names.rules.push_back(rule);
  }
  return names;
}

YAML::Node ConfigValue<TensorNames>::write(const TensorNames& names) {
  if (names.rules.empty()) return YAML::Node(names.preset);
  YAML::Node out(YAML::NodeType::Map);
  for (const NameRule& r : names.rules) out[r.pattern] = r.rewrite;
  return out;
}

}  // namespace pipelab
