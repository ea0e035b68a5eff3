#include "core/feed/shadow_sync.h"

#include "core/nn/document_layout.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/util/error.h"

namespace pipelab {
namespace {

/// Copies of the block parameters' values (heads are not part of the synchronous model).
Weights block_values(const Stage& stage) {
  Weights out;
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : stage.block_parameters()) out.push_back(p.detach().clone());
  return out;
}

double squared_norm(const Weights& w) {
  double sum = 0;
  for (const at::Tensor& t : w) sum += t.to(at::kDouble).pow(2).sum().item<double>();
  return sum;
}

/// ||a - b|| / ||b|| (0 when both are 0).
double relative_distance(const Weights& a, const Weights& b) {
  const double base = std::sqrt(squared_norm(b));
  const double d = distance(a, b);
  return base > 0 ? d / base : d;
}

}  // namespace

ShadowSync::ShadowSync(std::vector<Stage*> stages, std::vector<std::unique_ptr<Stage>> replicas)
    : stages_(std::move(stages)), replicas_(std::move(replicas)), pending_(stages_.size()), rows_(stages_.size()) {
  PIPELAB_ASSERT(stages_.size() == replicas_.size(), "shadow: {} stages, {} replicas", stages_.size(), replicas_.size());
  for (auto& r : replicas_) r->set_training(true);
}

void ShadowSync::saw_input(int mb, const at::Tensor& x) {
  std::lock_guard<std::mutex> lock(mutex_);
  inputs_.try_emplace(mb, x);
}

void ShadowSync::saw_target(int mb, const at::Tensor& y) {
  std::lock_guard<std::mutex> lock(mutex_);
  targets_.try_emplace(mb, y);
}

void ShadowSync::saw_documents(int mb, const at::Tensor& documents) {
  std::lock_guard<std::mutex> lock(mutex_);
  documents_.try_emplace(mb, documents);
}

void ShadowSync::saw_loss_scale(int mb, double scale) {
  std::lock_guard<std::mutex> lock(mutex_);
  scales_.try_emplace(mb, scale);
}

void ShadowSync::forward(Stage& stage, int mb) {
  std::vector<at::Tensor> rng = stage.rng_states();
  Weights read = block_values(stage);
  std::lock_guard<std::mutex> lock(mutex_);
  rng_[{stage.index(), mb}] = std::move(rng);
  read_forward_[{stage.index(), mb}] = std::move(read);
}

void ShadowSync::backward(Stage& stage, int mb) {
  Weights read = block_values(stage);
  std::lock_guard<std::mutex> lock(mutex_);
  read_backward_[{stage.index(), mb}] = std::move(read);
}

void ShadowSync::backward_done(Stage& stage, int mb) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_[static_cast<size_t>(stage.index())].push_back(mb);
}

void ShadowSync::before_update(Stage& stage) {
  const int r = stage.index();
  const int64_t k = stage.optimizer().steps();
  Update u;
  u.weights = block_values(stage);
  for (const at::Tensor& p : stage.block_parameters()) {
    u.grads.push_back(p.grad().defined() ? p.grad().detach().clone() : at::zeros_like(p));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  u.mbs = std::move(pending_[static_cast<size_t>(r)]);
  pending_[static_cast<size_t>(r)].clear();
  // The weights the forwards and backwards of this update's micro-batches read, against
  // the weights it is applied to (means over the micro-batches).
  for (const int mb : u.mbs) {
    const auto f = read_forward_.find({r, mb});
    if (f != read_forward_.end()) {
      u.forward_distance += relative_distance(f->second, u.weights) / static_cast<double>(u.mbs.size());
      read_forward_.erase(f);
    }
    const auto b = read_backward_.find({r, mb});
    if (b != read_backward_.end()) {
      u.backward_distance += relative_distance(b->second, u.weights) / static_cast<double>(u.mbs.size());
      read_backward_.erase(b);
    }
  }
  auto& made = updates_[k];
  made[r] = std::move(u);
  if (made.size() == stages_.size()) compute(k);
}

void ShadowSync::compute(int64_t k) {
  std::map<int, Update>& made = updates_.at(k);
  std::vector<const Weights*> weights;
  for (const auto& [r, u] : made) weights.push_back(&u.weights);
  // Stages whose update covers the same micro-batches share one synchronous pass (in every
  // pipelined scheme that is all of them).
  std::map<std::vector<int>, std::vector<int>> groups;
  for (const auto& [r, u] : made) groups[u.mbs].push_back(r);
  std::set<int> used;
  for (const auto& [mbs, members] : groups) {
    if (mbs.empty()) continue;
    const std::vector<Weights> sync = synchronous_gradients(mbs, weights);
    for (const int r : members) {
      const Update& u = made.at(r);
      const Weights& s = sync[static_cast<size_t>(r)];
      double dot = 0;
      for (size_t i = 0; i < s.size(); ++i) dot += (u.grads[i].to(at::kDouble) * s[i].to(at::kDouble)).sum().item<double>();
      const double na = std::sqrt(squared_norm(u.grads)), ns = std::sqrt(squared_norm(s));
      auto& rows = rows_[static_cast<size_t>(r)];
      rows.push_back({k + 1, "shadow_cosine", na > 0 && ns > 0 ? dot / (na * ns) : (na == ns ? 1.0 : 0.0)});
      rows.push_back({k + 1, "shadow_gradient_difference", relative_distance(u.grads, s)});
      rows.push_back({k + 1, "shadow_forward_distance", u.forward_distance});
      rows.push_back({k + 1, "shadow_backward_distance", u.backward_distance});
    }
    used.insert(mbs.begin(), mbs.end());
  }
  for (const int mb : used) {
    inputs_.erase(mb);
    targets_.erase(mb);
    documents_.erase(mb);
    scales_.erase(mb);
    for (size_t r = 0; r < stages_.size(); ++r) rng_.erase({static_cast<int>(r), mb});
  }
  updates_.erase(k);
}

std::vector<Weights> ShadowSync::synchronous_gradients(const std::vector<int>& mbs,
                                                       const std::vector<const Weights*>& weights) {
  const size_t n = replicas_.size();
  for (size_t r = 0; r < n; ++r) {
    at::NoGradGuard no_grad;
    const std::vector<at::Tensor> params = replicas_[r]->block_parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].data().copy_((*weights[r])[i]);
      params[i].mutable_grad() = at::Tensor();
    }
  }
  for (const int mb : mbs) {
    PIPELAB_ASSERT(inputs_.count(mb), "shadow: no input kept for micro-batch {}", mb);
    Tensors x{inputs_.at(mb)};
    const auto kept = documents_.find(mb);
    const at::Tensor documents = kept == documents_.end() ? at::Tensor() : kept->second;
    for (size_t r = 0; r < n; ++r) {
      Stage& replica = *replicas_[r];
      const auto rng = rng_.find({static_cast<int>(r), mb});
      if (rng != rng_.end()) replica.set_rng_states(rng->second);
      ForwardOptions options;
      if (replica.is_last()) {
        options.target = targets_.at(mb).to(replica.device());
        const auto scale = scales_.find(mb);
        options.loss_scale = scale == scales_.end() ? 1.0 : scale->second;
      }
      for (at::Tensor& t : x) t = t.to(replica.device());
      const at::Tensor layout = documents.defined() ? documents.to(replica.device()) : documents;
      const nn::DocumentScope scope(layout);
      x = replica.forward(mb, std::move(x), options).activations;
    }
    Tensors dy;
    for (size_t r = n; r-- > 0;) {
      Stage& replica = *replicas_[r];
      for (at::Tensor& t : dy) t = t.defined() ? t.to(replica.device()) : t;
      dy = replica.backward(mb, dy);
    }
  }
  std::vector<Weights> out(n);
  for (size_t r = 0; r < n; ++r) {
    for (const at::Tensor& p : replicas_[r]->block_parameters()) {
      out[r].push_back(p.grad().defined() ? p.grad().detach().clone() : at::zeros_like(p));
    }
  }
  return out;
}

void ShadowSync::collect(int r, std::vector<StageMetric>& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& rows = rows_[static_cast<size_t>(r)];
  out.insert(out.end(), rows.begin(), rows.end());
  rows.clear();
}

at::Tensor ShadowFeed::input(int mb) {
  at::Tensor x = inner_.input(mb);
  if (shadow_) shadow_->saw_input(mb, x);
  return x;
}

at::Tensor ShadowFeed::target(int mb) {
  at::Tensor y = inner_.target(mb);
  if (shadow_) shadow_->saw_target(mb, y);
  return y;
}

at::Tensor ShadowFeed::documents(int mb) {
  at::Tensor d = inner_.documents(mb);
  if (shadow_ && d.defined()) shadow_->saw_documents(mb, d);
  return d;
}

double ShadowFeed::loss_scale(int mb) {
  const double s = inner_.loss_scale(mb);
  if (shadow_) shadow_->saw_loss_scale(mb, s);
  return s;
}

}  // namespace pipelab
