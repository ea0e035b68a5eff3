#include "core/weights/version_stash.h"

#include <ATen/ATen.h>

namespace pipelab {

void VersionStash::keep_live(Stage& stage) {
  const int64_t v = stage.optimizer().steps();
  if (!versions_.count(v)) versions_.emplace(v, copy_weights(stage));
}

const Weights& VersionStash::get(int64_t version) const {
  auto it = versions_.find(version);
  PIPELAB_ASSERT(it != versions_.end(), "weight version {} is not stashed (oldest {})", version, oldest());
  return it->second;
}

void VersionStash::drop_before(int64_t oldest) {
  versions_.erase(versions_.begin(), versions_.lower_bound(oldest));
}

c10::IValue VersionStash::state() const {
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [v, w] : versions_) {
    c10::impl::GenericList list(c10::TensorType::get());
    for (const at::Tensor& t : w) list.push_back(t.to(at::kCPU));
    out.insert(std::to_string(v), list);
  }
  return out;
}

void VersionStash::load_state(Stage& stage, const c10::IValue& state) {
  versions_.clear();
  if (state.isNone()) return;
  const std::vector<at::Tensor> params = stage.parameters();
  for (const auto& kv : state.toGenericDict()) {
    Weights w;
    for (const c10::IValue& t : kv.value().toListRef()) w.push_back(t.toTensor().to(params.at(w.size()).options()));
    versions_.emplace(std::stoll(kv.key().toStringRef()), std::move(w));
  }
}

}  // namespace pipelab
