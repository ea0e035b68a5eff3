/// CUDA generators with a reachable state (cuda_generator.h). The registry maps a generator
/// to the state it was made with; entries live as long as the process (a run makes one
/// generator per block, a few dozen).
#ifdef PIPELAB_WITH_CUDA
#include "core/device/cuda_generator.h"

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>

#include <map>
#include <mutex>

#include "core/util/error.h"

namespace pipelab::device {
namespace {

using State = c10::intrusive_ptr<at::CUDAGeneratorState>;

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<const c10::GeneratorImpl*, State>& registry() {
  static std::map<const c10::GeneratorImpl*, State> r;
  return r;
}

// LibTorch 2.11 registers a generator through the generator (which also tells its state
// which graphs replay it); later versions keep graph state per capture, have no such call,
// and register the state itself.
template <class G>
auto register_through(G& gen, at::cuda::CUDAGraph& graph, const State&, int) -> decltype(gen.register_graph(&graph)) {
  return gen.register_graph(&graph);
}
template <class G>
void register_through(G&, at::cuda::CUDAGraph& graph, const State& state, long) {
  graph.register_generator_state(state);
}

}  // namespace

at::Generator make_cuda_generator(c10::DeviceIndex index, uint64_t seed) {
  State state = c10::make_intrusive<at::CUDAGeneratorState>();
  at::Generator gen = at::make_generator<at::CUDAGeneratorImpl>(index, state);
  gen.set_current_seed(seed);
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[gen.unsafeGetGeneratorImpl()] = std::move(state);
  return gen;
}

void register_generator(at::cuda::CUDAGraph& graph, const at::Generator& gen) {
  State state;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    const auto it = registry().find(gen.unsafeGetGeneratorImpl());
    PIPELAB_ASSERT(it != registry().end(), "a CUDA generator not made by make_cuda_generator");
    state = it->second;
  }
  register_through(*at::check_generator<at::CUDAGeneratorImpl>(gen), graph, state, 0);
}

}  // namespace pipelab::device
#endif
