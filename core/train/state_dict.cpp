#include "core/train/state_dict.h"

#include <ATen/ATen.h>

#include <map>
#include <set>

#include "core/util/names.h"

namespace pipelab {
namespace {

/// Every named parameter and buffer of the stages.
std::vector<std::pair<std::string, at::Tensor>> named_tensors(const std::vector<Stage*>& stages) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (Stage* s : stages) {
    for (const auto& kv : s->module().named_parameters()) out.emplace_back(kv.key(), kv.value());
    for (const auto& kv : s->module().named_buffers()) out.emplace_back(kv.key(), kv.value());
  }
  return out;
}

std::string list_some(const std::vector<std::string>& names) {
  const size_t shown = std::min<size_t>(names.size(), 8);
  std::vector<std::string> head(names.begin(), names.begin() + static_cast<long>(shown));
  return join(head, ", ") + (names.size() > shown ? fmt::format(" (+{} more)", names.size() - shown) : "");
}

}  // namespace

TensorDict model_state(const std::vector<Stage*>& stages) {
  TensorDict out;
  for (auto& [name, t] : named_tensors(stages)) out.emplace_back(name, t.detach().to(at::kCPU).clone());
  return out;
}

void load_model_state(const std::vector<Stage*>& stages, const TensorDict& state, bool strict,
                      const std::string& file) {
  std::map<std::string, at::Tensor> given(state.begin(), state.end());
  std::vector<std::string> missing, mismatched;
  std::set<std::string> used;
  const auto mine = named_tensors(stages);
  for (const auto& [name, t] : mine) {
    auto it = given.find(name);
    if (it == given.end()) {
      missing.push_back(name);
      continue;
    }
    used.insert(name);
    if (it->second.sizes() != t.sizes()) {
      mismatched.push_back(fmt::format("{} (file {}, model {})", name, shape_text(it->second.sizes()), shape_text(t.sizes())));
    }
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, t] : state) {
    if (!used.count(name)) unexpected.push_back(name);
  }
  if (!mismatched.empty()) {
    throw UserError(fmt::format("{}: shapes differ from the model for {}. Fix: check that the file was saved "
                                "from the same model options.",
                                file, list_some(mismatched)));
  }
  if (!unexpected.empty()) {
    std::vector<std::string> names;
    for (const auto& kv : mine) names.push_back(kv.first);
    throw UserError(fmt::format("{}: the model has no entries named {} (closest model names: {}). Fix: rename "
                                "the keys to <block>.<param> (see `pipelab describe`).",
                                file, list_some(unexpected), list_some(closest_first(unexpected.front(), names))));
  }
  if (strict && !missing.empty()) {
    throw UserError(fmt::format("{}: missing entries {}. Fix: save the whole state dict, or set init.strict: false "
                                "to keep the initial values of missing entries.",
                                file, list_some(missing)));
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, t] : mine) {
    auto it = given.find(name);
    if (it != given.end()) const_cast<at::Tensor&>(t).copy_(it->second);
  }
}

}  // namespace pipelab
