#include "core/model/partition.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace pipelab {

Replicas ConfigValue<Replicas>::read(const ConfigNode& n) {
  Replicas r;
  const auto positive_count = [&](const ConfigNode& c) {
    const int v = ConfigValue<int>::read(c);
    if (v < 1) c.fail(fmt::format("must be at least 1, got {}", v), "give a positive number of replicas");
    return v;
  };
  if (!n.yaml().IsSequence()) {
    r.count = positive_count(n);
    return r;
  }
  if (n.yaml().size() == 0) n.fail("an empty list", "give one count per pipeline stage, like [2, 1, 1]");
  for (size_t i = 0; i < n.yaml().size(); ++i) {
    r.per_stage.push_back(positive_count(ConfigNode(n.yaml()[i], n.source(), fmt::format("{}[{}]", n.path(), i))));
  }
  // Equal counts are copies of the whole pipeline.
  if (std::all_of(r.per_stage.begin(), r.per_stage.end(), [&](int c) { return c == r.per_stage.front(); })) {
    r.count = r.per_stage.front();
    r.per_stage.clear();
  }
  return r;
}

YAML::Node ConfigValue<Replicas>::write(const Replicas& r) {
  return r.per_stage.empty() ? YAML::Node(r.count) : ConfigValue<std::vector<int>>::write(r.per_stage);
}

Recompute ConfigValue<Recompute>::read(const ConfigNode& n) {
  Recompute r;
  if (n.yaml().IsSequence()) {
    r.kind = Recompute::Kind::Stages;
    for (size_t i = 0; i < n.yaml().size(); ++i) {
      const ConfigNode item(n.yaml()[i], n.source(), fmt::format("{}[{}]", n.path(), i));
      const int s = ConfigValue<int>::read(item);
      if (s < 0) item.fail(fmt::format("a stage cannot be negative, got {}", s), "number stages from 0");
      if (!r.stages.empty() && s <= r.stages.back()) {
        item.fail(fmt::format("stage {} comes after stage {}", s, r.stages.back()),
                  "list each stage once, in ascending order");
      }
      r.stages.push_back(s);
    }
    return r;
  }
  const std::string text = ConfigValue<std::string>::read(n);
  const std::pair<const char*, Recompute::Kind> names[] = {
      {"never", Recompute::Kind::Never}, {"except_last", Recompute::Kind::ExceptLast}, {"always", Recompute::Kind::Always}};
  for (const auto& [name, kind] : names) {
    if (text == name) {
      r.kind = kind;
      return r;
    }
  }
  n.fail(fmt::format("unknown choice of stages '{}'", text),
         "use never, except_last, always, or a list of stages like [0, 1]");
}

YAML::Node ConfigValue<Recompute>::write(const Recompute& r) {
  switch (r.kind) {
    case Recompute::Kind::Never: return YAML::Node("never");
    case Recompute::Kind::ExceptLast: return YAML::Node("except_last");
    case Recompute::Kind::Always: return YAML::Node("always");
    case Recompute::Kind::Stages: break;
  }
  return ConfigValue<std::vector<int>>::write(r.stages);
}

Offload ConfigValue<Offload>::read(const ConfigNode& n) {
  if (n.yaml().IsScalar() && n.text() == "none") return {};
  if (!n.yaml().IsMap()) {
    n.fail(fmt::format("expected {}", type()), "write none, or a map of stages, fraction and prefetch");
  }
  Offload o = read_options<Offload>(n);
  if (o.stages.kind == Recompute::Kind::Stages && o.stages.stages.empty()) {
    n.child("stages").fail("an empty list: offloading no stage",
                           "name the stages, e.g. stages: [0, 1], or write offload: none");
  }
  if (!o.any()) {
    (n.has("stages") ? n.child("stages") : n)
        .fail("offloading no stage", "name the stages, e.g. stages: [0, 1], or write offload: none");
  }
  return o;
}

YAML::Node ConfigValue<Offload>::write(const Offload& o) { return o.any() ? write_options(o) : YAML::Node("none"); }

std::vector<bool> Recompute::of(int count) const {
  std::vector<bool> out(static_cast<size_t>(std::max(0, count)), kind == Kind::Always || kind == Kind::ExceptLast);
  if (kind == Kind::ExceptLast && count > 0) out.back() = false;
  for (const int s : stages) {
    if (s < count) out[static_cast<size_t>(s)] = true;
  }
  return out;
}

Balance ConfigValue<Balance>::read(const ConfigNode& n) {
  Balance b;
  if (n.yaml().IsSequence()) {
    b.kind = Balance::Kind::Counts;
    b.counts = ConfigValue<std::vector<int>>::read(n);
    return b;
  }
  const std::string text = ConfigValue<std::string>::read(n);
  for (const Balance::Kind k : {Balance::Kind::Auto, Balance::Kind::Params, Balance::Kind::Flops, Balance::Kind::Time,
                                Balance::Kind::Memory}) {
    if (text == balance_name(k)) {
      b.kind = k;
      return b;
    }
  }
  b.kind = Balance::Kind::Named;
  b.name = text;
  return b;
}

const char* balance_name(Balance::Kind kind) {
  switch (kind) {
    case Balance::Kind::Auto: return "auto";
    case Balance::Kind::Params: return "params";
    case Balance::Kind::Flops: return "flops";
    case Balance::Kind::Time: return "time";
    case Balance::Kind::Memory: return "memory";
    case Balance::Kind::Counts:
    case Balance::Kind::Named: break;
  }
  return "";
}

YAML::Node ConfigValue<Balance>::write(const Balance& b) {
  switch (b.kind) {
    case Balance::Kind::Named: return YAML::Node(b.name);
    case Balance::Kind::Counts: return ConfigValue<std::vector<int>>::write(b.counts);
    default: return YAML::Node(balance_name(b.kind));
  }
}

std::vector<int> balance_by_weight(const std::vector<double>& weights, int parts) {
  const size_t n = weights.size();
  const size_t k = static_cast<size_t>(parts);
  PIPELAB_ASSERT(parts >= 1 && n >= k, "cannot split {} blocks into {} stages", n, parts);
  std::vector<double> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[j][i]: smallest possible largest-group sum for the first i blocks in j groups.
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> cut(k + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t j = 1; j <= k; ++j) {
    for (size_t i = j; i <= n; ++i) {
      for (size_t c = j - 1; c < i; ++c) {
        const double cost = std::max(best[j - 1][c], prefix[i] - prefix[c]);
        if (cost < best[j][i]) {
          best[j][i] = cost;
          cut[j][i] = c;
        }
      }
    }
  }
  std::vector<int> counts(k);
  for (size_t j = k, i = n; j >= 1; --j) {
    counts[j - 1] = static_cast<int>(i - cut[j][i]);
    i = cut[j][i];
  }
  return counts;
}

std::vector<int> resolve_balance(const Balance& balance, int stages, int blocks, const BlockCostFn& costs,
                                 const std::map<std::string, std::vector<int>>& named,
                                 const ConfigSource& source) {
  if (stages > blocks) {
    source.fail("partition.stages",
                fmt::format("{} stages but the model has only {} blocks", stages, blocks),
                fmt::format("use at most {} stages", blocks));
  }
  std::vector<int> counts;
  switch (balance.kind) {
    case Balance::Kind::Auto:
    case Balance::Kind::Params:
    case Balance::Kind::Flops:
    case Balance::Kind::Time:
    case Balance::Kind::Memory:
      return balance_by_weight(costs(balance.kind == Balance::Kind::Auto ? kAutoBalance : balance.kind), stages);
    case Balance::Kind::Named: {
      auto it = named.find(balance.name);
      if (it == named.end()) {
        std::vector<std::string> names{"auto"};
        for (const auto& kv : named) names.push_back(kv.first);
        source.fail("partition.balance", fmt::format("this model has no split named '{}'", balance.name),
                    fmt::format("use one of: {}", join(closest_first(balance.name, names), ", ")));
      }
      counts = it->second;
      break;
    }
    case Balance::Kind::Counts: counts = balance.counts; break;
  }
  if (static_cast<int>(counts.size()) != stages) {
    source.fail("partition.balance",
                fmt::format("{} entries for {} stages", counts.size(), stages),
                fmt::format("give one block count per stage, or set partition.stages: {}", counts.size()));
  }
  for (int c : counts) {
    if (c < 1) {
      source.fail("partition.balance", fmt::format("every stage needs at least one block, got {}", describe_value(counts)),
                  "use counts >= 1");
    }
  }
  const int sum = std::accumulate(counts.begin(), counts.end(), 0);
  if (sum != blocks) {
    source.fail("partition.balance",
                fmt::format("the counts {} sum to {}, but the model has {} blocks", describe_value(counts), sum, blocks),
                fmt::format("make them sum to {} (see `pipelab describe` for the block list) or use balance: auto",
                            blocks));
  }
  return counts;
}

}  // namespace pipelab
