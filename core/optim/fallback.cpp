#include "core/optim/fallback.h"

#include <fmt/format.h>

#include <algorithm>

namespace pipelab {

std::string shape_text(const at::Tensor& t) {
  std::string out;
  for (const int64_t d : t.sizes()) out += (out.empty() ? "" : " x ") + std::to_string(d);
  return out.empty() ? "a scalar" : out;
}

Fallback::Fallback(const std::vector<at::Tensor>& params, const std::vector<bool>& mine,
                   const std::optional<OptimizerSection>& section, const Component& owner, const std::string& why)
    : index_(params.size(), -1), section_(section) {
  std::vector<at::Tensor> others;
  for (size_t i = 0; i < params.size(); ++i) {
    if (mine.at(i)) continue;
    index_[i] = static_cast<int>(others.size());
    others.push_back(params[i]);
  }
  if (others.empty()) return;
  if (!section_) {
    owner.fail("fallback",
               fmt::format("{}, and this stage has {} other parameters (the first has shape {})", why, others.size(),
                           shape_text(others.front())),
               "add an optimizer for them, e.g. `fallback: {type: adamw, lr: 3.0e-4, weight_decay: 0.01}`");
  }
  optimizer_ = section_->factory->make(std::move(others));
}

at::Tensor Fallback::direction(size_t i, const DirectionRequest& request) const {
  return optimizer_->direction(static_cast<size_t>(index_.at(i)), request);
}

void Fallback::append_state(std::vector<std::pair<std::string, at::Tensor>>& out) const {
  if (!optimizer_) return;
  for (auto [name, t] : optimizer_->state()) {
    const size_t dot = name.find('.');
    const int j = std::stoi(name.substr(0, dot));
    const auto it = std::find(index_.begin(), index_.end(), j);
    out.emplace_back(std::to_string(it - index_.begin()) + name.substr(dot), t);
  }
}

void Fallback::load_state(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  if (!optimizer_) return;
  std::vector<std::pair<std::string, at::Tensor>> theirs;
  for (const auto& [name, t] : state) {
    const size_t dot = name.find('.');
    const size_t i = std::stoul(name.substr(0, dot));
    if (i < index_.size() && index_[i] >= 0) theirs.emplace_back(std::to_string(index_[i]) + name.substr(dot), t);
  }
  optimizer_->load_state(theirs);
}

void Fallback::set_steps(int64_t steps) {
  if (optimizer_) optimizer_->set_steps(steps);
}

void Fallback::step(double lr, double owner_base_lr, int64_t steps) {
  if (!optimizer_) return;
  optimizer_->set_lr(section_->factory->base_lr() * (owner_base_lr > 0 ? lr / owner_base_lr : 1.0));
  optimizer_->set_steps(steps);
  optimizer_->step();
}

}  // namespace pipelab
