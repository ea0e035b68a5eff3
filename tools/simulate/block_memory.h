#pragma once
/// The bytes each block of a model keeps from its forward until its backward (the saved
/// tensors and its output), measured once on this machine with LibTorch's allocator
/// (core/util/memory_meter.h): autograd saves the same tensors on any device, so the sizes
/// carry over to devices that are not here (cuDNN workspaces aside).
#include "core/model/meta_device.h"
#include "core/model/model.h"
#include "core/optim/optimizer.h"
#include "tools/simulate/derive.h"
#include "tools/simulate/shape_autocast.h"

namespace pipelab::sim {

/// On the last block, the loss the last stage's forward computes (cross-entropy against
/// `examples` zero targets: its log-probabilities are kept for the backward, as large as a
/// language model's logits, and its backward is a softmax over them); elsewhere `out`.
Tensors with_loss(Tensors out, bool last, const DataSpec& data, int examples);

/// Builds every block of `def` (seeded as a run would be), runs `examples` zero examples
/// through them in training mode with autograd, and returns per block the bytes its forward
/// allocated that were still alive once the whole forward had run, per example; then, each
/// block run alone at `examples` and four times as many, how far its forward and its
/// backward raise the bytes while they run (BlockMemory::forward_rise, backward_rise), what a
/// split backward's I keeps for its W (input_backward_kept), and,
/// given `optimizer`, how far a step of it on the block's parameters does (update_rise).
/// With `meta`, all of it on the meta device (core/model/meta_device.h): the same bytes,
/// counted from the tensors' sizes without computing them (an operator without a meta
/// kernel throws c10::Error). With `amp`, every forward runs under that autocast
/// (ShapeAutocast: on the meta device too), so the bytes are the run's own; what each block
/// keeps is then measured at two sizes, since the weights' casts do not grow with the
/// micro-batch (BlockMemory::retained_fixed).
BlockMemory measure_block_memory(const ModelDef& def, const DataSpec& data, uint64_t seed,
                                 const OptimizerFactory* optimizer = nullptr, int examples = 2, bool meta = false,
                                 const AutocastSpec* amp = nullptr);
/// The same with the blocks from `build`.
BlockMemory measure_block_memory(const ModelDef& def, const DataSpec& data, ProfileBlocks& build,
                                 const OptimizerFactory* optimizer, int examples = 2, const AutocastSpec* amp = nullptr);

}  // namespace pipelab::sim
