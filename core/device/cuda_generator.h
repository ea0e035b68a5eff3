#pragma once
/// CUDA generators whose Philox state pipelab keeps a handle to, so that a CUDA graph can
/// register them (run.cuda_graphs, core/stage/stage_graphs.h): a graph replays a dropout
/// kernel at the offset the generator has at replay time only for generators registered
/// with it, and LibTorch registers a generator through its state, which the generator
/// itself keeps private. Included only by CUDA sources, under PIPELAB_WITH_CUDA.
#ifdef PIPELAB_WITH_CUDA
#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace at::cuda {
struct CUDAGraph;
}  // namespace at::cuda

namespace pipelab::device {

/// A CUDA generator on device `index` seeded with `seed` (as LibTorch's createCUDAGenerator
/// and set_current_seed), whose state register_generator can reach.
at::Generator make_cuda_generator(c10::DeviceIndex index, uint64_t seed);

/// Registers `gen`, made by make_cuda_generator, with `graph`; call before its capture.
void register_generator(at::cuda::CUDAGraph& graph, const at::Generator& gen);

}  // namespace pipelab::device
#endif
