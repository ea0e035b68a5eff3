#include "core/records/state_dict.h"

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

std::string LoadReport::describe(const std::string& file) const {
  // The model's tensors: loaded, absent from the file, or there in another shape (skipped).
  std::string out = fmt::format("init.from {}: loaded {} of the model's {} tensors", file, loaded,
                                loaded + missing.size() + skipped.size());
  if (!unexpected.empty()) out += fmt::format("; {} entr{} not in the model, ignored: {}", unexpected.size(),
                                              unexpected.size() == 1 ? "y" : "ies", list_some(unexpected));
  if (!missing.empty()) {
    out += fmt::format("; {} entr{} not in the file, kept at their initial values: {}", missing.size(),
                       missing.size() == 1 ? "y" : "ies", list_some(missing));
  }
  if (!dropped.empty()) {
    out += fmt::format("; {} entr{} dropped by init.names: {}", dropped.size(), dropped.size() == 1 ? "y" : "ies",
                       list_some(dropped));
  }
  if (!skipped.empty()) {
    out += fmt::format("; {} entr{} of another shape skipped (init.skip_mismatched), kept at their initial values: {}",
                       skipped.size(), skipped.size() == 1 ? "y" : "ies", list_some(skipped));
  }
  return out;
}

LoadReport load_model_state(const std::vector<Stage*>& stages, const TensorDict& state, bool strict,
                            const std::string& file, bool skip_mismatched) {
  std::map<std::string, at::Tensor> given(state.begin(), state.end());
  LoadReport report;
  std::vector<std::string> mismatched, wrong_kind;
  std::set<std::string> used;
  const auto mine = named_tensors(stages);
  for (const auto& [name, t] : mine) {
    auto it = given.find(name);
    if (it == given.end()) {
      report.missing.push_back(name);
      continue;
    }
    used.insert(name);
    if (it->second.sizes() != t.sizes()) {
      const std::string what =
          fmt::format("{} (file {}, model {})", name, shape_text(it->second.sizes()), shape_text(t.sizes()));
      (skip_mismatched ? report.skipped : mismatched).push_back(what);
      if (skip_mismatched) given.erase(it);  // not copied: it keeps its initial value
      continue;
    }
    // Booleans or integers copied into a float weight would load as 0/1 or whole numbers: a
    // file of some other tensor, never a checkpoint of this model.
    if (t.is_floating_point() && !it->second.is_floating_point()) {
      wrong_kind.push_back(fmt::format("{} (dtype {} in the file)", name, c10::toString(it->second.scalar_type())));
    }
  }
  for (const auto& [name, t] : state) {
    if (!used.count(name)) report.unexpected.push_back(name);
  }
  report.loaded = used.size() - report.skipped.size();
  if (used.empty() && !mine.empty()) {
    std::vector<std::string> model_names;
    for (const auto& kv : mine) model_names.push_back(kv.first);
    throw UserError(fmt::format("{}: none of its {} entries is a tensor of the model (the file has {}; the model has "
                                "{}). Fix: map the file's names onto the model's (names are <block>.<param>, see "
                                "`pipelab describe`), or give the file saved from this model",
                                file, state.size(), list_some(report.unexpected), list_some(model_names)));
  }
  if (report.loaded == 0 && !mine.empty() && !report.skipped.empty()) {
    // Skipping every tensor would train from scratch while the experiment says it starts
    // from the file.
    throw UserError(fmt::format("{}: every entry the model has differs in shape ({}), so init.skip_mismatched "
                                "would load nothing. Fix: give the file saved from this model's options",
                                file, list_some(report.skipped)));
  }
  if (!mismatched.empty()) {
    throw UserError(fmt::format("{}: shapes differ from the model for {}. Fix: check that the file was saved "
                                "from the same model options, or, to fine-tune it onto another head, set "
                                "init.skip_mismatched: true (those tensors keep their initial values)",
                                file, list_some(mismatched)));
  }
  if (!wrong_kind.empty()) {
    throw UserError(fmt::format("{}: the model's floating-point weights would get values that are not: {}. Fix: save "
                                "the model's weights as floats (float32, bf16 or fp16), or map these names elsewhere "
                                "with init.names",
                                file, list_some(wrong_kind)));
  }
  if (strict && !(report.unexpected.empty() && report.missing.empty())) {
    std::string what;
    if (!report.unexpected.empty()) what = "entries the model does not have: " + list_some(report.unexpected);
    if (!report.missing.empty()) {
      what += (what.empty() ? "" : "; ") + std::string("model entries the file does not have: ") + list_some(report.missing);
    }
    throw UserError(fmt::format("{}: {}. Fix: save the whole state dict of this model (names are <block>.<param>, see "
                                "`pipelab describe`), or set init.strict: false to ignore extra entries and keep "
                                "initial values for missing ones.",
                                file, what));
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, t] : mine) {
    auto it = given.find(name);
    if (it != given.end()) const_cast<at::Tensor&>(t).copy_(it->second);
  }
  return report;
}

}  // namespace pipelab
