#include "schemes/shared/greedy.h"

#include <torch/csrc/autograd/autograd.h>

#include <fmt/format.h>

#include "core/scheme/staleness.h"
#include "schemes/shared/interlocking_heads.h"

namespace pipelab::greedy {
namespace {

class LocalRoute : public GradientRoute {
 public:
  Message backward(Stage& stage, int mb, const std::vector<Message>& /*in*/) override {
    const Stage::Forwarded f = stage.forwarded(mb);
    at::Tensor loss = f.output;  // the last stage's forward returns its (true) loss
    if (!stage.is_last()) {
      loss = stage.head_loss().compute(stage.head_forward(f.output), f.target);
      record_.add(stage, "head_loss", loss.item<double>());
    }
    torch::autograd::backward({loss});
    stage.release(mb);
    return {};
  }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }

 private:
  StalenessRecorder record_;
};

}  // namespace

void check_heads(const ConfigNode& node, const std::string& spec) {
  if (spec == "auto") return;
  try {
    interlocking::check_head_grammar(spec);
  } catch (const interlocking::HeadSpecError& e) {
    node.child("heads").fail(e.problem, e.fix);
  }
}

void attach_head(Stage& stage, const std::string& spec, const std::vector<int64_t>& output_shape, const DataSpec& data,
                 const std::string& refusal_fix, const Fail& fail) {
  if (stage.is_last()) return;
  if (!data.target_shape.empty()) {
    // The heads of both papers classify a whole example; a target per position (a language
    // model) has no head defined here.
    fail("heads",
         fmt::format("the auxiliary heads predict one class per example, but the dataset has a target per position "
                     "(targets of shape {})",
                     shape_text(data.target_shape)),
         refusal_fix);
  }
  const std::string chosen = spec == "auto" ? interlocking::default_head(output_shape) : spec;
  try {
    stage.set_head(fmt::format("head{}", stage.index()), interlocking::build_head(chosen, output_shape, data.classes),
                   std::make_shared<CrossEntropyLoss>());
  } catch (const interlocking::HeadSpecError& e) {
    fail("heads", fmt::format("for stage {}'s output {}: {}", stage.index(), shape_text(output_shape), e.problem), e.fix);
  }
}

Schedule greedy_steps(int stages, int units, bool head_action) {
  Schedule s(stages);
  for (int r = 0; r < stages; ++r) {
    for (int t = 0; t < units; ++t) {
      s.add(r, Action::F(r, t));
      if (head_action) s.add(r, Action::H(r, t));
      s.add(r, Action::B(r, t));
      s.add(r, Action::U(r));
    }
  }
  return s;
}

std::unique_ptr<GradientRoute> local_route() { return std::make_unique<LocalRoute>(); }

}  // namespace pipelab::greedy
