#include "tools/report/run_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>
#include <map>
#include <set>

#include "core/config/yaml_file.h"
#include "core/io/input_file.h"
#include "core/util/error.h"
#include "core/util/names.h"
#include "tools/sweep/key_paths.h"

namespace fs = std::filesystem;

namespace pipelab::tools {
namespace {

const std::vector<std::pair<std::string, std::string>>& aliases() {
  static const std::vector<std::pair<std::string, std::string>> a{
      {"model", "model.type"},     {"scheme", "scheme.type"},  {"stages", "partition.stages"},
      {"dataset", "dataset.type"}, {"seed", "run.seed"},       {"optimizer", "optimizer.type"},
      {"lr", "optimizer.lr"},      {"chunks", "scheme.chunks"}};
  return a;
}

/// A run's config.yaml or summary.json; a UserError saying why it cannot be used.
YAML::Node load_json_or_yaml(const fs::path& path, const char* expected) {
  YAML::Node node = load_yaml_file(path.string());
  if (!node.IsMap()) {
    throw UserError(fmt::format("{}: {} is not {}", path.string(),
                                node.IsNull() ? "empty" : node.IsSequence() ? "a list" : "a single value", expected));
  }
  return node;
}

/// The run's place in its sweep's grid (<sweep>/sweep-order.txt), -1 when it has none.
int grid_order_of(const fs::path& dir) {
  const fs::path order = dir.parent_path() / "sweep-order.txt";
  std::string text;
  try {
    if (input_exists(order.string())) text = read_file(order.string());
  } catch (const UserError&) {  // not a regular file: the runs keep their natural order
  }
  std::istringstream lines(text);
  int k = 0;
  for (std::string id; std::getline(lines, id); ++k) {
    if (id == dir.filename().string()) return k;
  }
  return -1;
}

std::vector<std::pair<std::string, std::string>> leaves_of(const YAML::Node& config) {
  std::vector<std::pair<std::string, std::string>> out;
  flatten_leaves("", config, out);
  return out;
}

}  // namespace

bool RunInfo::diverged() const {
  return has_summary() && summary["status"] && summary["status"].Scalar() == "diverged";
}

std::vector<RunInfo> load_runs(const std::string& root, std::vector<std::string>* skipped) {
  if (!fs::is_directory(root)) {
    throw UserError(
        fmt::format("{}: no such folder. Fix: give the folder of a sweep (sweep.output) or of runs.", root));
  }
  std::vector<RunInfo> runs;
  std::vector<std::string> left_out;
  const auto add = [&](const fs::path& dir) {
    RunInfo run;
    run.dir = dir.string();
    run.name = fs::relative(dir, root).lexically_normal().string();
    try {
      run.config = load_json_or_yaml(dir / "config.yaml", "a run's configuration");
      run.summary = input_exists((dir / "summary.json").string())
                        ? load_json_or_yaml(dir / "summary.json", "a run's summary (a JSON object)")
                        : YAML::Node(YAML::NodeType::Undefined);
      run.grid_order = grid_order_of(dir);
    } catch (const UserError& e) {
      left_out.push_back(fmt::format("{}: {}", run.name, e.what()));
      return;
    }
    runs.push_back(run);
  };
  if (fs::exists(fs::path(root) / "config.yaml")) add(root);
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_directory()) continue;
    if (fs::exists(it->path() / "config.yaml")) {
      add(it->path());
      it.disable_recursion_pending();  // a run's own metrics/ and checkpoints/ hold no runs
    }
  }
  if (runs.empty() && !left_out.empty()) {
    throw UserError(fmt::format("{}: no run can be read:\n  {}\nFix: repair or delete these runs' files (or rerun "
                                "them with --overwrite).",
                                root, join(left_out, "\n  ")));
  }
  if (runs.empty()) {
    throw UserError(
        fmt::format("{}: holds no runs (no folder with a config.yaml). Fix: give the folder a sweep or "
                    "`pipelab run` wrote to (sweep.output or run.output).",
                    root));
  }
  if (skipped) *skipped = left_out;
  // Sorted through indices: assigning a YAML::Node re-points the node it was copied from
  // (yaml-cpp's reference semantics), so RunInfos are only ever copy-constructed.
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return natural_less(runs[a].name, runs[b].name); });
  std::vector<RunInfo> sorted;
  sorted.reserve(runs.size());
  for (const size_t i : order) sorted.push_back(runs[i]);
  return sorted;
}

std::string resolve_key(const std::string& key) {
  for (const auto& [alias, path] : aliases()) {
    if (key == alias) return path;
  }
  return key;
}

std::string key_aliases_help() {
  std::vector<std::string> parts;
  for (const auto& [alias, path] : aliases()) parts.push_back(alias + " = " + path);
  return join(parts, ", ");
}

std::vector<std::string> parse_keys(const std::string& list, const std::string& option) {
  std::vector<std::string> out;
  if (list.find_first_not_of(' ') == std::string::npos) return out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    std::string key = list.substr(start, comma - start);
    key.erase(0, key.find_first_not_of(' '));
    key.erase(key.find_last_not_of(' ') + 1);
    if (key.empty()) {
      throw UserError(fmt::format("{} '{}': an empty key between commas. Fix: list config keys separated by single "
                                  "commas, e.g. {} scheme,stages.",
                                  option, list, option));
    }
    out.push_back(resolve_key(key));
    start = comma + 1;
  }
  return out;
}

std::optional<std::string> config_text(const RunInfo& run, const std::string& key) {
  const YAML::Node n = find_path(run.config, key);
  if (!n.IsDefined()) return std::nullopt;
  return value_text(n);
}

std::string label_of(const RunInfo& run, const std::vector<std::string>& keys) {
  std::vector<std::string> parts;
  for (const std::string& k : keys) parts.push_back(config_text(run, k).value_or("-"));
  return join(parts, "/");
}

void require_config_key(const std::vector<RunInfo>& runs, const std::string& key, const std::string& option) {
  std::set<std::string> known;
  for (const RunInfo& run : runs) {
    if (find_path(run.config, key).IsDefined()) return;
    for (const auto& leaf : leaves_of(run.config)) {
      known.insert(leaf.first);
    }
  }
  std::vector<std::string> names(known.begin(), known.end());
  for (const auto& [alias, path] : aliases()) names.push_back(alias);
  std::vector<std::string> closest = closest_first(key, names);
  closest.resize(std::min<size_t>(closest.size(), 5));
  throw UserError(
      fmt::format("{} {}: no run has this key in its config.yaml. Fix: use a config key path or an "
                  "alias; closest: {}.",
                  option, key, join(closest, ", ")));
}

std::vector<RunInfo> filter_runs(const std::vector<RunInfo>& runs, const std::vector<std::string>& where) {
  std::vector<std::pair<std::string, YAML::Node>> conditions;
  for (const std::string& w : where) {
    const size_t eq = w.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UserError(fmt::format("--where {}: expected key=value. Fix: write e.g. --where optimizer.lr=0.1.", w));
    }
    YAML::Node value;
    try {
      value = parse_yaml(w.substr(eq + 1), "--where " + w);
    } catch (const UserError&) {
      value = YAML::Node(w.substr(eq + 1));
    }
    conditions.emplace_back(resolve_key(w.substr(0, eq)), value);
  }
  std::vector<RunInfo> out;
  for (const RunInfo& run : runs) {
    const bool keep = std::all_of(conditions.begin(), conditions.end(),
                                  [&](const auto& c) { return same_value(find_path(run.config, c.first), c.second); });
    if (keep) out.push_back(run);
  }
  return out;
}

std::vector<std::string> differing_keys(const std::vector<const RunInfo*>& runs) {
  static const std::vector<std::string> kIgnored{"run.seed", "run.output", "run.threads", "run.progress", "pipelab"};
  std::vector<std::string> order;
  std::map<std::string, std::set<std::string>> values;
  std::map<std::string, size_t> present;
  for (const RunInfo* run : runs) {
    for (const auto& [path, text] : leaves_of(run->config)) {
      const bool ignored =
          std::any_of(kIgnored.begin(), kIgnored.end(), [&](const std::string& i) { return paths_overlap(i, path); });
      if (ignored) continue;
      if (!values.count(path)) order.push_back(path);
      values[path].insert(text);
      ++present[path];
    }
  }
  std::vector<std::string> out;
  for (const std::string& p : order) {
    if (values[p].size() > 1 || present[p] != runs.size()) out.push_back(p);
  }
  return out;
}

namespace {

/// Digit runs compared by value inside otherwise alphabetical text.
bool digits_less(const std::string& a, const std::string& b) {
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      const std::string x = a.substr(i, ie - i), y = b.substr(j, je - j);
      const std::string xs = x.substr(std::min(x.find_first_not_of('0'), x.size()));
      const std::string ys = y.substr(std::min(y.find_first_not_of('0'), y.size()));
      if (xs.size() != ys.size()) return xs.size() < ys.size();
      if (xs != ys) return xs < ys;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

/// The parts of a label or run name between '/', ',' and '='.
std::vector<std::string> label_parts(const std::string& s) {
  std::vector<std::string> out(1);
  for (const char c : s) {
    if (c == '/' || c == ',' || c == '=') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

}  // namespace

bool natural_less(const std::string& a, const std::string& b) {
  const std::vector<std::string> x = label_parts(a), y = label_parts(b);
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (x[i] == y[i]) continue;
    const std::optional<double> u = parse_number(x[i]), v = parse_number(y[i]);
    if (u && v && *u != *v) return *u < *v;
    return digits_less(x[i], y[i]);
  }
  return x.size() < y.size();
}

}  // namespace pipelab::tools
