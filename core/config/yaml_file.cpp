#include "core/config/yaml_file.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "core/config/config_node.h"
#include "core/io/input_file.h"

namespace pipelab {
namespace {

/// Walks the parser's events (no tree is built) and counts what the tree would hold with
/// its aliases expanded. yaml-cpp registers an anchor before its children are parsed, so
/// `a: &a [*a]` is a node that contains itself; such an alias is refused here.
class AliasGuard : public YAML::EventHandler {
 public:
  explicit AliasGuard(std::string source) : source_(std::move(source)) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnAnchor(const YAML::Mark&, const std::string& name) override { pending_name_ = name; }
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    for (const Open& o : open_) {
      if (o.anchor == anchor) {
        fail(mark, fmt::format("the alias *{} refers to its own anchor &{} (line {}), which contains it: a value "
                               "that never ends",
                               name(anchor), name(anchor), o.mark.line + 1),
             "remove the alias, or move it out of the anchored value");
      }
    }
    const auto it = anchors_.find(anchor);
    if (it == anchors_.end()) return;  // yaml-cpp reports an unknown anchor itself
    add(mark, it->second.values, it->second.depth);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    start(mark, anchor);
  }
  void OnSequenceEnd() override { end(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    start(mark, anchor);
  }
  void OnMapEnd() override { end(); }

 private:
  struct Open {
    YAML::anchor_t anchor;
    YAML::Mark mark;
    uint64_t values = 1;  ///< this collection and everything under it, aliases expanded
    int depth = 1;        ///< levels below it, itself included
  };
  struct Size {
    uint64_t values;
    int depth;
  };

  std::string name(YAML::anchor_t anchor) const {
    const auto it = names_.find(anchor);
    return it == names_.end() ? std::to_string(anchor) : it->second;
  }
  void remember(YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) names_[anchor] = pending_name_;
    pending_name_.clear();
  }
  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    remember(anchor);
    if (anchor != YAML::NullAnchor) anchors_[anchor] = {1, 0};
    add(mark, 1, 0);
  }
  void start(const YAML::Mark& mark, YAML::anchor_t anchor) {
    remember(anchor);
    if (static_cast<int>(open_.size()) + 1 > kMaxYamlDepth) {
      fail(mark, fmt::format("values nested more than {} levels deep", kMaxYamlDepth), "flatten the structure");
    }
    open_.push_back({anchor, mark});
  }
  void end() {
    const Open done = open_.back();
    open_.pop_back();
    if (done.anchor != YAML::NullAnchor) anchors_[done.anchor] = {done.values, done.depth};
    add(done.mark, done.values, done.depth);
  }
  /// Adds a value of `values` values and `depth` levels to the innermost open collection.
  void add(const YAML::Mark& mark, uint64_t values, int depth) {
    if (open_.empty()) return;
    Open& parent = open_.back();
    parent.values += values;
    parent.depth = std::max(parent.depth, depth + 1);
    if (parent.values > kMaxYamlValues) {
      fail(mark, fmt::format("with its aliases expanded, the file holds more than {} values (nested aliases "
                             "multiply: an alias bomb)",
                             kMaxYamlValues),
           "write the values out, or use fewer nested aliases");
    }
    if (static_cast<int>(open_.size()) + depth > kMaxYamlDepth) {
      fail(mark, fmt::format("with its aliases expanded, values nest more than {} levels deep", kMaxYamlDepth),
           "use fewer nested aliases");
    }
  }
  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& what, const std::string& fix) const {
    throw ConfigError(fmt::format("{}: {}. Fix: {}.", format_mark(source_, mark), what, fix));
  }

  std::string source_;
  std::string pending_name_;
  std::vector<Open> open_;
  std::map<YAML::anchor_t, Size> anchors_;
  std::map<YAML::anchor_t, std::string> names_;
};

[[noreturn]] void syntax_error(const std::string& source, const YAML::ParserException& e) {
  throw ConfigError(fmt::format("{}: invalid YAML: {}. Fix: correct the syntax at that place.",
                                format_mark(source, e.mark), e.msg));
}

}  // namespace

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    const size_t line_start = text.rfind('\n', nul);
    const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(nul), '\n'));
    const size_t column = nul - (line_start == std::string::npos ? 0 : line_start + 1) + 1;
    throw ConfigError(fmt::format("{}:{}:{}: a NUL byte: this is not a text file, or it is damaged. Fix: give the "
                                  "YAML file, saved as text.",
                                  source, line, column));
  }
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    AliasGuard guard(source);
    parser.HandleNextDocument(guard);
    YAML::Node root = YAML::Load(text);
    check_yaml_keys(root, source);
    return root;
  } catch (const YAML::ParserException& e) {
    syntax_error(source, e);
  }
}

YAML::Node load_yaml_file(const std::string& path) { return parse_yaml(read_file(path, 64u << 20), path); }

void check_yaml_keys(const YAML::Node& node, const std::string& file) {
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) check_yaml_keys(item, file);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, YAML::Mark> seen;
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (key == "<<") {
      throw ConfigError(fmt::format("{}: YAML merge keys (<<) are not supported. Fix: write the merged keys out.",
                                    format_mark(file, kv.first.Mark())));
    }
    const auto [it, fresh] = seen.emplace(key, kv.first.Mark());
    if (!fresh) {
      throw ConfigError(fmt::format("{}: duplicate key '{}' (first at line {}); YAML keeps only one of them. Fix: "
                                    "merge the two into one.",
                                    format_mark(file, kv.first.Mark()), key, it->second.line + 1));
    }
    check_yaml_keys(kv.second, file);
  }
}

}  // namespace pipelab
