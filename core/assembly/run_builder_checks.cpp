/// What the run builder refuses of the model and of partition.offload.blocks before anything
/// is built or trained (core/assembly/run_builder.h).
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <mutex>

#include <fmt/ranges.h>

#include "core/assembly/run_builder.h"
#include "core/model/meta_device.h"
#include "core/util/memory_size.h"
#include "core/util/names.h"

namespace pipelab {

void RunBuilder::check_model_fits() const {
  // Building re-seeds the global generator: put back, so that nothing after sees a difference.
  at::Generator global = at::detail::getDefaultCPUGenerator();
  at::Tensor saved;
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    saved = global.get_state();
  }
  int64_t parameters = 0;
  try {
    ProfileBlocks build(p_->def, static_cast<uint64_t>(e_.run.seed), /*meta=*/true);
    for (size_t i = 0; i < p_->def.blocks.size(); ++i) parameters += count_parameters(*build(i).module.ptr());
  } catch (const std::exception&) {
    parameters = 0;  // a block the meta device cannot hold (a TorchScript module): built as it is
  }
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    global.set_state(saved);
  }
  // On the CPU each parameter with its gradient and two optimizer states, in every copy of the
  // model; with GPUs, one copy's weights, which are built here before they move to their device.
  const double element = p_->dtype == at::kDouble ? 8 : 4;
  const bool on_host = !e_.run.any_cuda_device();
  const double bytes = static_cast<double>(parameters) * element * (on_host ? 4.0 * p_->plan.copies() : 1.0);
  const std::string problem = memory_problem(bytes);
  if (problem.empty()) return;
  e_.source->fail("model",
                  fmt::format("model {} has {:.3g} parameters{}: {} it {}", e_.model->type(),
                              static_cast<double>(parameters),
                              on_host && p_->plan.copies() > 1 ? fmt::format(" in each of {} copies", p_->plan.copies())
                                                               : "",
                              on_host ? "with their gradients and optimizer state" : "built on this host, its weights",
                              problem),
                  "use a smaller model (a planned file's `--preset cpu-mini` runs its miniature here), or a machine "
                  "with more memory");
}

/// partition.offload.blocks names blocks of the model.
void RunBuilder::check_offload_blocks(const std::vector<Block>& blocks) const {
  const std::vector<std::string>& listed = e_.partition.offload.blocks;
  if (listed.empty()) return;
  std::vector<std::string> names;
  for (const Block& b : blocks) names.push_back(b.name);
  for (size_t i = 0; i < listed.size(); ++i) {
    if (std::find(names.begin(), names.end(), listed[i]) != names.end()) continue;
    e_.source->fail(fmt::format("partition.offload.blocks[{}]", i),
                    fmt::format("model {} has no block '{}'", e_.model->type(), listed[i]),
                    fmt::format("use one of: {}", fmt::join(closest_first(listed[i], names), ", ")));
  }
}

/// partition.offload.blocks lie on offloading stages, and each listed stage holds one of
/// them: otherwise the blocks' activations stay, or the stage offloads nothing.
void RunBuilder::check_offload_block_stages() const {
  const Offload& o = e_.partition.offload;
  if (o.blocks.empty()) return;
  std::vector<int> stage_of;  // per block, its pipeline stage
  for (size_t p = 0; p < p_->balance.size(); ++p) stage_of.insert(stage_of.end(), static_cast<size_t>(p_->balance[p]), static_cast<int>(p));
  std::vector<bool> named(p_->balance.size(), false);
  for (size_t i = 0; i < o.blocks.size(); ++i) {
    size_t b = 0;
    while (b < p_->def.blocks.size() && p_->def.blocks[b].name != o.blocks[i]) ++b;
    if (b >= stage_of.size()) continue;  // check_offload_blocks names an unknown block
    const int p = stage_of[b];
    named[static_cast<size_t>(p)] = true;
    if (!p_->plan.offloads(p_->plan.layout().stage(p, 0))) {
      e_.source->fail(fmt::format("partition.offload.blocks[{}]", i),
                      fmt::format("block '{}' is on pipeline stage {}, which does not offload (partition.offload.stages)",
                                  o.blocks[i], p),
                      fmt::format("add stage {} to partition.offload.stages, or list blocks of the offloading stages",
                                  p));
    }
  }
  const std::vector<int>& listed = o.stages.stages;
  for (size_t i = 0; i < listed.size(); ++i) {
    if (static_cast<size_t>(listed[i]) < named.size() && !named[static_cast<size_t>(listed[i])]) {
      e_.source->fail(fmt::format("partition.offload.stages[{}]", i),
                      fmt::format("stage {} holds none of partition.offload.blocks, so it would offload nothing",
                                  listed[i]),
                      "list one of its blocks in partition.offload.blocks (`pipelab describe` shows the cut), or "
                      "drop the stage");
    }
  }
}

}  // namespace pipelab
