#pragma once
/// What the ALLREDUCE before an update does to the gradients of the stages it gathers
/// (docs/schemes.md, "Notation and optimizers": clipping across stages, tied weights), in the order of Megatron-LM's
/// `finalize_model_grads` (after the last backward, before the optimizer step):
///
/// 1. the replicas of each pipeline stage sum their gradients, in replica order (data
///    parallelism; a sum in a fixed order, so every executor gets the same bits);
/// 2. the two copies of a tied parameter (Megatron's embedding group: the input embedding
///    on the first stage, its copy as the output projection on the last) sum their
///    gradients, so both copies step alike, as one shared parameter would;
/// 3. a gradient-norm clip exactly as torch.nn.utils.clip_grad_norm_ over the whole model:
///    T = ||(||g_1||_p, ..., ||g_n||_p)||_p, every g multiplied by min(1, c / (T + 1e-6))
///    (even when that is 1). T counts each logical parameter once (a tie's second copy is
///    left out, Megatron's `shared` flag), over every stage gathered or over each stage
///    alone (per-stage clipping, AsyncPP's choice).
///
/// A pure function of the gradients, used in one process (collective.h) and over a process
/// group (dist/group_all_reduce.h) alike.
#include <ATen/Tensor.h>

#include <vector>

namespace pipelab {

struct GradientPlan {
  /// One gathered stage: its pipeline stage and its replica.
  struct Member {
    int stage = 0;
    int replica = 0;
  };
  /// Parameter `first` of pipeline stage `first_stage` (an index into Stage::parameters())
  /// and parameter `second` of `second_stage` are one logical parameter.
  struct Tie {
    int first_stage = 0;
    size_t first = 0;
    int second_stage = 0;
    size_t second = 0;
  };
  std::vector<Member> members;
  /// Each stage's sum divided by its replicas (DDP's mean, which PipeDream's replicated
  /// stages run; replicas of whole pipelines sum shares whose losses are already scaled).
  bool average = false;
  std::vector<Tie> ties;
  /// False: the copies keep their own gradients (PipeDream-2BW's reference code: its skipped
  /// tied-weight all-reduce, docs/schemes.md, "Quirks").
  bool sum_ties = true;
  double clip_max_norm = 0;  ///< 0: no clip
  double clip_norm_type = 2;  ///< p; infinity: the largest magnitude
  bool clip_per_stage = false;
  /// Each tensor by its own norm (BertAdam's, as Chimera's code clips: docs/schemes.md, "Quirks").
  bool clip_per_tensor = false;

  /// A plan of `replicas` replicas of one stage, summing only.
  static GradientPlan replicas_of(int stage, int replicas);
};

/// `grads[m][k]`: member m's gradient of its stage's parameter k (undefined: none), all on
/// one device. Returns every member's finished gradients (a stage's replicas get equal
/// tensors).
std::vector<std::vector<at::Tensor>> finish_gradients(const std::vector<std::vector<at::Tensor>>& grads,
                                                       const GradientPlan& plan);

}  // namespace pipelab
