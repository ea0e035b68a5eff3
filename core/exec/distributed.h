#pragma once
/// The distributed executor: one process per device, or per group of consecutive devices,
/// over a c10d process group (core/dist). Within a process its devices run on threads as in
/// the threaded executor; between processes messages go point-to-point (dist/wire.h). The
/// numbers equal the sequential executor's bit for bit, because every action still runs
/// through exec/actions.h in its device's order.
#include <memory>
#include <string>

#include "core/dist/wire.h"
#include "core/exec/device_channels.h"
#include "core/exec/executor.h"
#include "core/exec/process_world.h"

namespace pipelab {

class StageThreads;

struct DistributedOptions {
  int rank = 0;
  int world_size = 1;
  std::string master = "127.0.0.1:29500";
  double timeout_s = 300;
  int intra_op_threads = 0;
  std::string backend = "auto";
  template <class V>
  void fields(V& v) {
    v("rank", rank, "this process's rank (pipelab launch and `pipelab run --rank` set it)", non_negative);
    v("world_size", world_size, "number of processes; rank p runs devices [p*D/N, (p+1)*D/N) of D", positive);
    v("master", master, "host:port of the rendezvous store that rank 0 serves (127.0.0.1 unless told otherwise)");
    v("timeout_s", timeout_s, "seconds a rank waits for a peer before it stops with an error naming it", positive);
    v("intra_op_threads", intra_op_threads, "LibTorch intra-op threads per device thread (0: threads / local devices)",
      non_negative);
    v.choice("backend", backend, Choices<std::string>{{"auto", "auto"}, {"gloo", "gloo"}, {"nccl", "nccl"}},
             "how CUDA tensors cross between processes: gloo (host memory), nccl (GPU to GPU; every rank needs GPUs "
             "of its own), auto (nccl where it can, else gloo)");
  }
};

class DistributedExecutor : public Configured<Executor, DistributedOptions> {
 public:
  explicit DistributedExecutor(DistributedOptions options);
  ~DistributedExecutor() override;

  void run(const Schedule& schedule, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) override;
  /// This rank in the process group, which it joins at attach() (or at the first run()).
  World& world() override { return world_; }

 private:
  void relay_results(const std::vector<StageSlot>& slots, std::vector<std::pair<int, struct MicroBatchResult>>& kept,
                     Feed& feed);

  ProcessWorld world_;
  DeviceChannels channels_;
  dist::WireSizes wire_sizes_;  ///< the largest message of each edge so far (dist/wire.h)
  std::unique_ptr<StageThreads> threads_;  ///< one per local device, made at the first run
};

}  // namespace pipelab
