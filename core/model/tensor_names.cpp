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

std::vector<NameRule> TensorNames::with(const std::vector<NameRule>& published) const {
  std::vector<NameRule> out(rules.begin(), rules.begin() + static_cast<std::ptrdiff_t>(preset_at));
  out.insert(out.end(), published.begin(), published.end());
  out.insert(out.end(), rules.begin() + static_cast<std::ptrdiff_t>(preset_at), rules.end());
  return out;
}

namespace {

constexpr const char* kNamesFix = "use none, torchvision, huggingface, rules {pattern: rewrite, ...}, or a list of "
                                  "them such as [{'fc\\..*': ''}, torchvision]";

/// A naming's name, checked.
std::string read_naming(const ConfigNode& n) {
  const std::string preset = n.text();
  if (preset != "none" && preset != "torchvision" && preset != "huggingface") {
    n.fail(fmt::format("'{}' is not a naming", preset), kNamesFix);
  }
  return preset;
}

/// The rules of a `{pattern: rewrite, ...}` mapping, in order, each checked.
void read_rules(const ConfigNode& n, std::vector<NameRule>& rules) {
  if (!n.yaml().IsMap() || n.yaml().size() == 0) n.fail("init.names is neither a naming nor rules", kNamesFix);
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
    rules.push_back(rule);
  }
}

}  // namespace

TensorNames ConfigValue<TensorNames>::read(const ConfigNode& n) {
  TensorNames names;
  if (n.yaml().IsScalar()) {
    names.preset = read_naming(n);
    return names;
  }
  if (!n.yaml().IsSequence()) {
    read_rules(n, names.rules);
    return names;
  }
  if (n.yaml().size() == 0) n.fail("an empty list", kNamesFix);
  bool named = false;
  for (size_t i = 0; i < n.yaml().size(); ++i) {
    const ConfigNode item(n.yaml()[i], n.source(), fmt::format("{}[{}]", n.path(), i));
    if (!item.yaml().IsScalar()) {
      read_rules(item, names.rules);
      continue;
    }
    if (named) item.fail("a second naming", "list one naming (torchvision or huggingface) and your rules");
    names.preset = read_naming(item);
    names.preset_at = names.rules.size();
    named = true;
  }
  return names;
}

YAML::Node ConfigValue<TensorNames>::write(const TensorNames& names) {
  if (names.rules.empty()) return YAML::Node(names.preset);
  const auto rules = [&](size_t from, size_t to) {
    YAML::Node out(YAML::NodeType::Map);
    for (size_t i = from; i < to; ++i) out[names.rules[i].pattern] = names.rules[i].rewrite;
    return out;
  };
  if (names.preset == "none") return rules(0, names.rules.size());
  YAML::Node out(YAML::NodeType::Sequence);
  if (names.preset_at > 0) out.push_back(rules(0, names.preset_at));
  out.push_back(names.preset);
  if (names.preset_at < names.rules.size()) out.push_back(rules(names.preset_at, names.rules.size()));
  return out;
}

}  // namespace pipelab
