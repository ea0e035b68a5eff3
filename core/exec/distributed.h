#pragma once
/// The distributed executor: one process per stage, or per group of consecutive stages,
/// over a c10d process group (core/dist). Within a process its stages run on threads as in
/// the threaded executor; between processes messages go point-to-point (dist/wire.h). The
/// numbers equal the sequential executor's bit for bit, because every action still runs
/// through exec/actions.h in its stage's order.
#include <memory>
#include <string>

#include "core/dist/process_group.h"
#include "core/exec/executor.h"

namespace pipelab {

class StageThreads;

struct DistributedOptions {
  int rank = 0;
  int world_size = 1;
  std::string master = "127.0.0.1:29500";
  double timeout_s = 300;
  int intra_op_threads = 0;
  template <class V>
  void fields(V& v) {
    v("rank", rank, "this process's rank (pipelab launch and `pipelab run --rank` set it)", non_negative);
    v("world_size", world_size, "number of processes; rank p runs stages [p*D/N, (p+1)*D/N)", positive);
    v("master", master, "host:port of the rendezvous store that rank 0 serves (127.0.0.1 unless told otherwise)");
    v("timeout_s", timeout_s, "seconds a rank waits for a peer before it stops with an error naming it", positive);
    v("intra_op_threads", intra_op_threads, "LibTorch intra-op threads per stage thread (0: threads / local stages)",
      non_negative);
  }
};

class DistributedExecutor : public Configured<Executor, DistributedOptions> {
 public:
  explicit DistributedExecutor(DistributedOptions options);
  ~DistributedExecutor() override;

  void run(const Schedule& schedule, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) override;
  /// Joins the process group (every rank must, within the timeout).
  void attach(int stages) override;
  bool writes_records() const override { return writes_results(stages_); }
  std::string process_name() const override { return "rank" + std::to_string(options_.rank); }
  /// Each stage's parameters and buffers travel from its rank to the writing rank.
  void gather_weights(std::vector<StageSlot>& slots) override;
  bool any(bool flag) override;
  std::vector<std::string> gather_text(const std::string& key, const std::string& text) override;
  void merge_stats() override;
  /// Over the process group, one replica per rank (dist/group_all_reduce.h).
  std::shared_ptr<AllReduce> all_reduce(int ranks) override;

  /// The rank that runs stage `stage` of a `stages`-stage pipeline.
  static int owner(int stage, int stages, int world_size);
  /// Whether this rank reports the results (it owns the last stage; other ranks send it
  /// theirs after every run).
  bool writes_results(int stages) const {
    return stages == 0 || owner(stages - 1, stages, options_.world_size) == options_.rank;
  }

 private:
  void relay_results(int stages, std::vector<std::pair<int, struct MicroBatchResult>>& kept, Feed& feed);

  std::unique_ptr<dist::ProcessGroup> group_;
  std::unique_ptr<StageThreads> threads_;
  int stages_ = 0;  ///< the pipeline's stage count, fixed by the first run
};

}  // namespace pipelab
