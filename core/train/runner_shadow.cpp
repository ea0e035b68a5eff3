/// run.shadow: sync (core/train/shadow_sync.h): the replica of the model the shadow computes
/// on, observing every stage.
#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

#include "core/train/runner.h"
#include "core/train/shadow_sync.h"

namespace pipelab {

void Runner::start_shadow() {
  const RunOptions& run = e_.run;
  if (run.shadow == RunOptions::Shadow::Off) return;
  if (plan_.copies() > 1) {
    e_.source->fail("run.shadow",
                    fmt::format("scheme {} runs {} replicas of its pipeline, and the shadow replays one",
                                e_.scheme->type(), plan_.copies()),
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
  for (const auto& stage : stages_) {
    StageSpec spec;
    spec.index = stage->index();
    spec.count = stage->count();
    spec.first_block = next;
    spec.inputs = stage->input_names();
    spec.outputs = stage->output_names();
    for (size_t k = 0; k < stage->blocks().size(); ++k, ++next) {
      spec.blocks.push_back(build_block(def_, next, static_cast<uint64_t>(run.seed)));
    }
    spec.loss = stage->is_last() ? def_.loss : nullptr;
    spec.device = stage->device();
    spec.seed = static_cast<uint64_t>(run.seed);
    spec.precision = {run.amp, run.loss_scale};
    spec.channels_last = run.channels_last;
    replicas.push_back(std::make_unique<Stage>(std::move(spec)));
    if (dtype_ != at::kFloat) replicas.back()->module().to(dtype_);
  }
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    global.set_state(saved);
  }
  shadow_ = std::make_unique<ShadowSync>(stages(), std::move(replicas));
  for (StageSlot& slot : slots_) slot.observers.push_back(shadow_.get());
}

}  // namespace pipelab
