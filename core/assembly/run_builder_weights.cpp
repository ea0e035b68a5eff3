/// The run builder's weights (core/assembly/run_builder.h): init.from's file, the model's tied
/// parameters, and run.shadow: sync's replica of the model observing every stage.
#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <mutex>
#include <optional>

#include <fmt/ranges.h>

#include "core/assembly/run_builder.h"
#include "core/feed/shadow_sync.h"
#include "core/io/safetensors.h"
#include "core/records/state_dict.h"

namespace pipelab {
namespace {

/// Stage p's parameter named `name` ("<block>.<param>"), as (p, index in parameters()).
std::optional<std::pair<int, size_t>> find_parameter(const std::vector<Stage*>& stages, const std::string& name) {
  for (size_t p = 0; p < stages.size(); ++p) {
    size_t k = 0;
    for (const auto& kv : stages[p]->module().named_parameters()) {
      if (kv.key() == name) return std::make_pair(static_cast<int>(p), k);
      ++k;
    }
  }
  return std::nullopt;
}

/// Index of `name` in `state`, or state.size().
size_t entry_of(const TensorDict& state, const std::string& name) {
  size_t i = 0;
  while (i < state.size() && state[i].first != name) ++i;
  return i;
}

}  // namespace

void RunBuilder::tie_file_entries(TensorDict& state, const std::string& path) const {
  for (const TiedParameter& tie : p_->def.ties) {
    const size_t a = entry_of(state, tie.first), b = entry_of(state, tie.second);
    if (a == state.size() && b == state.size()) continue;
    // Hugging Face writes one copy of a tied weight (no lm_head.weight): the tie fills the other.
    if (a == state.size() || b == state.size()) {
      const size_t have = a == state.size() ? b : a;
      state.emplace_back(a == state.size() ? tie.first : tie.second, state[have].second);
      continue;
    }
    const at::Tensor& x = state[a].second;
    const at::Tensor& y = state[b].second;
    if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type() || !at::equal(x, y)) {
      e_.source->fail(
          "init.from",
          fmt::format("model {} ties {} and {} (one weight), but {} holds two different tensors for them{}: it is an "
                      "untied model's checkpoint, and loading it tied would replace its {} by its {}",
                      e_.model->type(), tie.first, tie.second, path,
                      x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type()
                          ? fmt::format(" (largest difference {:.3g})",
                                        (x.to(at::kDouble) - y.to(at::kDouble)).abs().max().item<double>())
                          : "",
                      tie.second, tie.first),
          "untie the model (llama: model.tie_embeddings: false) to keep both, or give a tied checkpoint");
    }
  }
}

std::vector<NameRule> RunBuilder::name_rules() const {
  const TensorNames& names = e_.init.names;
  if (names.preset == "none") return names.rules;
  const auto it = p_->def.published_names.find(names.preset);
  if (it == p_->def.published_names.end()) {
    std::vector<std::string> known;
    for (const auto& kv : p_->def.published_names) known.push_back(kv.first);
    e_.source->fail("init.names",
                    fmt::format("model {} has no {} names{}", e_.model->type(), names.preset,
                                known.empty() ? "" : fmt::format(" (it has {})", fmt::join(known, ", "))),
                    "give the renaming as rules {pattern: rewrite, ...}, or none");
  }
  return names.with(it->second);
}

void RunBuilder::load_initial_weights() {
  if (!e_.init.from) return;
  const std::string& path = *e_.init.from;
  if (!std::filesystem::is_regular_file(path)) {
    e_.source->fail("init.from", fmt::format("file '{}' not found", path),
                    "give the path of a .pt file written by torch.save(model.state_dict(), path) or of a "
                    ".safetensors file");
  }
  std::vector<std::string> dropped;
  TensorDict state = rename_tensors(load_weights(path), name_rules(), path, &dropped);
  if (state.empty() && !dropped.empty()) {
    e_.source->fail("init.names",
                    fmt::format("its rules drop every one of the {} entries of {} (an empty rewrite drops a tensor)",
                                dropped.size(), path),
                    "give each rule that should keep tensors a rewrite, e.g. 'features\\.(.*)': 'body.\\1'");
  }
  tie_file_entries(state, path);
  for (int r = 0; r < p_->plan.copies(); ++r) {
    // Messages about the file's names say when they are init.names' rewrites, not the file's own.
    const std::string label = name_rules().empty() ? path : path + " (its names as init.names' rules rewrote them)";
    LoadReport report = load_model_state(p_->replica_stages(r), state, e_.init.strict, label, e_.init.skip_mismatched);
    report.dropped = dropped;
    if (r == 0) p_->init_report = report.describe(path);
  }
}


void RunBuilder::tie_parameters() {
  const std::vector<Stage*> first_replica = p_->replica_stages(0);
  for (const TiedParameter& tie : p_->def.ties) {
    const auto a = find_parameter(first_replica, tie.first), b = find_parameter(first_replica, tie.second);
    PIPELAB_ASSERT(a && b, "model {} ties {} and {}, which it does not have", e_.model->type(), tie.first, tie.second);
    p_->ties.push_back({a->first, a->second, b->first, b->second});
    // The second copy starts as the first (Megatron's setup all-reduce of the zeroed copy).
    at::NoGradGuard no_grad;
    for (int r = 0; r < p_->plan.replicas(); ++r) {
      const std::vector<Stage*> stages = p_->replica_stages(r);
      const at::Tensor from = stages[static_cast<size_t>(a->first)]->parameters().at(a->second);
      at::Tensor to = stages[static_cast<size_t>(b->first)]->parameters().at(b->second);
      PIPELAB_ASSERT(from.sizes() == to.sizes(), "tied {} and {} have shapes {} and {}", tie.first, tie.second,
                     shape_text(from.sizes()), shape_text(to.sizes()));
      to.copy_(from);
    }
  }
}

void RunBuilder::start_shadow() {
  const RunOptions& run = e_.run;
  if (run.shadow == RunOptions::Shadow::Off) return;
  if (p_->plan.copies() > 1) {
    e_.source->fail("run.shadow",
                    fmt::format("scheme {} runs {} replicas of its pipeline, and the shadow replays one",
                                e_.scheme->type(), p_->plan.copies()),
                    "use run.shadow: off with replicas, or partition.replicas: 1");
  }
  if (!e_.executor->world().process_name().empty()) {
    e_.source->fail("run.shadow", "the shadow run needs every stage in one process, and this executor spreads them",
                    "use executor sequential or threaded with run.shadow: sync");
  }
  if (run.amp == Amp::Fp16) {
    e_.source->fail("run.shadow",
                    "fp16's scaled gradients and skipped updates have no synchronous counterpart to compare with",
                    "use run.amp: bf16 or none with run.shadow: sync");
  }
  // The replica's blocks are built under the run's seeds like the stages' (their values are
  // overwritten before every use); building them re-seeds the global generator, which is put
  // back so that nothing after this line sees a difference.
  at::Generator global = at::detail::getDefaultCPUGenerator();
  at::Tensor saved;
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    saved = global.get_state();
  }
  std::vector<std::unique_ptr<Stage>> replicas;
  size_t next = 0;
  for (const auto& stage : p_->stages) {
    StageSpec spec;
    spec.index = stage->index();
    spec.count = stage->count();
    spec.first_block = next;
    spec.inputs = stage->input_names();
    spec.outputs = stage->output_names();
    for (size_t k = 0; k < stage->blocks().size(); ++k, ++next) {
      spec.blocks.push_back(build_block(p_->def, next, static_cast<uint64_t>(run.seed)));
    }
    spec.loss = stage->is_last() ? p_->def.loss : nullptr;
    spec.device = stage->device();
    spec.seed = static_cast<uint64_t>(run.seed);
    spec.precision = {run.amp, run.loss_scale};
    spec.channels_last = run.channels_last;
    replicas.push_back(std::make_unique<Stage>(std::move(spec)));
    if (p_->dtype != at::kFloat) replicas.back()->module().to(p_->dtype);
  }
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    global.set_state(saved);
  }
  p_->shadow = std::make_unique<ShadowSync>(p_->all_stages(), std::move(replicas));
  for (StageSlot& slot : p_->slots) slot.observers.push_back(p_->shadow.get());
}

}  // namespace pipelab
