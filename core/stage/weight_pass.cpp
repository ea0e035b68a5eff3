#include "core/stage/weight_pass.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace pipelab {
namespace {
using torch::autograd::Edge;
using torch::autograd::Node;
using torch::autograd::variable_list;
}  // namespace

// Named, not anonymous: WeightPass::Impl (declared in the header) holds a Kept, and a class
// with external linkage may not hold a type with internal linkage (-Wsubobject-linkage).
namespace weight_pass_detail {

/// What arrives at a node during I, kept for W.
struct Kept {
  variable_list grads;
};

class KeepGradients : public torch::autograd::FunctionPreHook {
 public:
  explicit KeepGradients(std::shared_ptr<Kept> kept) : kept_(std::move(kept)) {}
  variable_list operator()(const variable_list& grads) override {
    kept_->grads = grads;
    return grads;
  }

 private:
  std::shared_ptr<Kept> kept_;
};

}  // namespace weight_pass_detail

struct WeightPass::Impl {
  using Kept = weight_pass_detail::Kept;
  /// Parameters split at one node: the node (its edges start W) and what it got in I.
  struct Group {
    Edge node;  ///< input_nr unused: W starts at every input of the node
    std::shared_ptr<Kept> kept;
    std::vector<at::Tensor> params;
  };
  std::vector<Group> groups;
  std::vector<at::Tensor> whole;  ///< parameters W walks the graph for
};

WeightPass::WeightPass(const std::vector<at::Tensor>& roots, const std::vector<at::Tensor>& inputs,
                       const std::vector<at::Tensor>& params)
    : impl_(std::make_unique<Impl>()) {
  // Every node of the graph, and who feeds a gradient into it (its consumers in the forward).
  std::unordered_map<Node*, std::vector<Node*>> parents;
  std::unordered_map<Node*, Edge> handle;  // a node's owning edge (keeps the pointer type torch's)
  std::vector<Node*> stack;
  for (const at::Tensor& r : roots) {
    const Edge e = torch::autograd::impl::gradient_edge(r);
    if (e.is_valid() && handle.emplace(e.function.get(), e).second) stack.push_back(e.function.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& next : n->next_edges()) {
      if (!next.is_valid()) continue;
      parents[next.function.get()].push_back(n);
      if (handle.emplace(next.function.get(), next).second) stack.push_back(next.function.get());
    }
  }
  // The inputs' half: the nodes an input's gradient passes through.
  std::unordered_set<Node*> to_inputs;
  for (const at::Tensor& x : inputs) {
    const auto acc = torch::autograd::impl::try_get_grad_accumulator(x);
    if (acc && handle.count(acc.get())) stack.push_back(acc.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (!to_inputs.insert(n).second) continue;
    for (Node* p : parents[n]) stack.push_back(p);
  }
  // Each parameter's way up from its accumulator to where it meets the inputs' half.
  std::map<Node*, size_t> group_of;
  for (const at::Tensor& p : params) {
    const auto acc = torch::autograd::impl::try_get_grad_accumulator(p);
    if (!acc || !handle.count(acc.get())) continue;  // not in this graph: no gradient, as a whole walk
    std::set<Node*> meets, seen;
    stack.assign(1, acc.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      for (Node* up : parents[n]) {
        if (to_inputs.count(up)) meets.insert(up);
        else stack.push_back(up);
      }
    }
    if (meets.size() != 1 || to_inputs.empty()) {
      impl_->whole.push_back(p);
      continue;
    }
    Node* at_node = *meets.begin();
    auto [it, fresh] = group_of.emplace(at_node, impl_->groups.size());
    if (fresh) {
      auto kept = std::make_shared<weight_pass_detail::Kept>();
      at_node->add_pre_hook(std::make_unique<weight_pass_detail::KeepGradients>(kept));
      impl_->groups.push_back({handle.at(at_node), kept, {}});
    }
    impl_->groups[it->second].params.push_back(p);
  }
}

WeightPass::~WeightPass() = default;

size_t WeightPass::split_parameters() const {
  size_t n = 0;
  for (const Impl::Group& g : impl_->groups) n += g.params.size();
  return n;
}

void WeightPass::run(const std::vector<at::Tensor>& roots, const std::vector<at::Tensor>& root_grads) {
  auto& engine = torch::autograd::Engine::get_default_engine();
  // One engine run per meeting node: a run from two of them would feed the lower one twice
  // (once kept, once recomputed from the upper one).
  for (const Impl::Group& g : impl_->groups) {
    torch::autograd::edge_list starts, weights;
    variable_list grads;
    for (size_t i = 0; i < g.kept->grads.size(); ++i) {
      if (!g.kept->grads[i].defined()) continue;
      starts.emplace_back(g.node.function, static_cast<uint32_t>(i));
      grads.push_back(g.kept->grads[i]);
    }
    if (starts.empty()) continue;  // nothing reached the node in I: nothing reaches these weights
    for (const at::Tensor& p : g.params) weights.push_back(torch::autograd::impl::gradient_edge(p));
    engine.execute(starts, grads, /*keep_graph=*/true, /*create_graph=*/false, /*accumulate_grad=*/true, weights);
  }
  if (!impl_->whole.empty() && !roots.empty()) {
    torch::autograd::backward(roots, root_grads, /*retain_graph=*/true, /*create_graph=*/false, impl_->whole);
  }
}

}  // namespace pipelab
