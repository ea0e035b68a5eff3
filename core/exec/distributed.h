#pragma once
/// The distributed executor: one process per device, or per group of consecutive devices,
/// over a c10d process group (core/processes). Within a process its devices run on threads as in
/// the threaded executor; between processes messages go point-to-point (dist/wire.h). The
/// numbers equal the sequential executor's bit for bit, because every action still runs
/// through exec/actions.h in its device's order.
#include <memory>
#include <string>

#include "core/processes/wire.h"
#include "core/exec/device_channels.h"
#include "core/exec/executor.h"
#include "core/exec/host_links.h"
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
  double shm_mib = 64;
  double spin_us = 100;
  template <class V>
  void fields(V& v) {
    v("rank", rank, "this process's rank (pipelab launch and `pipelab run --rank` set it)", non_negative);
    v("world_size", world_size, "number of processes; rank p runs devices [p*D/N, (p+1)*D/N) of D", positive);
    v("master", master, "host:port of the rendezvous store that rank 0 serves (127.0.0.1 unless told otherwise)");
    v("timeout_s", timeout_s, "seconds a rank waits for a peer before it stops with an error naming it", positive);
    v("intra_op_threads", intra_op_threads, "LibTorch intra-op threads per device thread (0: threads / local devices)",
      non_negative);
    v.choice("backend", backend,
             Choices<std::string>{{"auto", "auto"}, {"gloo", "gloo"}, {"shm", "shm"}, {"nccl", "nccl"}},
             "how messages cross between processes: gloo (c10d's Gloo, host memory), shm (shared memory between "
             "ranks of one machine, host memory), nccl (CUDA tensors GPU to GPU; every rank needs GPUs of its own; "
             "shared memory or Gloo for the rest), auto (nccl where every stage is on a GPU, shared memory between "
             "ranks of one machine, Gloo between machines)");
    v("shm_mib", shm_mib, "MiB of /dev/shm each shared-memory link commits for its ring (one link each way per "
      "pair of ranks that exchange messages); larger messages go over Gloo", positive);
    v("spin_us", spin_us, "microseconds a rank polls its shared-memory links for a message before it sleeps",
      non_negative);
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
  dist::ShmOptions shm_options() const;

  ProcessWorld world_;
  DeviceChannels channels_;
  HostLinks links_;
  dist::WireSizes wire_sizes_;  ///< the largest message of each edge so far (dist/wire.h)
  std::unique_ptr<StageThreads> threads_;  ///< one per local device, made at the first run
};

}  // namespace pipelab
