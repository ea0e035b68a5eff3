#pragma once
/// The distributed executor: one process per device, or per group of consecutive devices,
/// over a c10d process group (core/dist). Within a process its devices run on threads as in
/// the threaded executor; between processes messages go point-to-point (dist/wire.h). The
/// numbers equal the sequential executor's bit for bit, because every action still runs
/// through exec/actions.h in its device's order.
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
    v("world_size", world_size, "number of processes; rank p runs devices [p*D/N, (p+1)*D/N) of D", positive);
    v("master", master, "host:port of the rendezvous store that rank 0 serves (127.0.0.1 unless told otherwise)");
    v("timeout_s", timeout_s, "seconds a rank waits for a peer before it stops with an error naming it", positive);
    v("intra_op_threads", intra_op_threads, "LibTorch intra-op threads per device thread (0: threads / local devices)",
      non_negative);
  }
};

class DistributedExecutor : public Configured<Executor, DistributedOptions> {
 public:
  explicit DistributedExecutor(DistributedOptions options);
  ~DistributedExecutor() override;

  void run(const Schedule& schedule, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) override;
  /// Joins the process group (every rank must, within the timeout).
  void attach(const std::vector<int>& placement) override;
  bool writes_records() const override { return writes_results(); }
  std::string process_name() const override { return "rank" + std::to_string(options_.rank); }
  /// Each stage's parameters and buffers travel from its rank to the writing rank.
  void gather_weights(std::vector<StageSlot>& slots) override;
  bool any(bool flag) override;
  std::vector<std::string> gather_text(const std::string& key, const std::string& text) override;
  void merge_stats() override;
  /// Over a c10d subgroup of the members' ranks, one member per rank (a stage's replicas, or
  /// every stage for a model-wide clip or tie; dist/group_all_reduce.h); a plan of one member
  /// stays in this process. Every rank calls it for every plan, in the same order.
  std::shared_ptr<AllReduce> all_reduce(GradientPlan plan) override;

  /// The rank that runs device `device` of `devices`.
  static int owner(int device, int devices, int world_size);
  /// Whether this rank reports the results (it owns the last stage; other ranks send it
  /// theirs after every run).
  bool writes_results() const { return placement_.empty() || stage_owner(stages() - 1) == options_.rank; }

 private:
  int stages() const { return static_cast<int>(placement_.size()); }
  int devices() const { return devices_; }
  int stage_owner(int stage) const;
  void relay_results(std::vector<std::pair<int, struct MicroBatchResult>>& kept, Feed& feed);
  /// Brings every process's traced actions and memory peaks to the writer, on its clock.
  void merge_trace();

  std::unique_ptr<dist::ProcessGroup> group_;
  /// The all-reduces' subgroups this rank is in, and how many plans all_reduce() has seen.
  std::vector<std::unique_ptr<dist::ProcessGroup>> subgroups_;
  int plans_ = 0;
  std::unique_ptr<StageThreads> threads_;
  std::vector<int> placement_;  ///< the device of each stage, fixed by attach()
  int devices_ = 0;
  int64_t trace_merges_ = 0;  ///< merge_trace() calls so far (each uses its own store key)
};

}  // namespace pipelab
