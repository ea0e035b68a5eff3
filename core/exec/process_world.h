#pragma once
/// The world of a multi-process run (core/exec/world.h): this process's rank in a c10d
/// process group (core/processes), the placement of every stage on the ranks, and the
/// collectives the runner needs over them. The distributed executor runs its actions over
/// the same group (core/exec/distributed.h).
#include <memory>
#include <string>
#include <vector>

#include "core/processes/process_group.h"
#include "core/exec/world.h"

namespace pipelab {

class ProcessWorld : public World {
 public:
  /// Rank `options.rank` of `options.world_size`; nothing is joined before attach().
  explicit ProcessWorld(dist::GroupOptions options) : options_(std::move(options)) {}
  ~ProcessWorld() override;
  ProcessWorld(const ProcessWorld&) = delete;
  ProcessWorld& operator=(const ProcessWorld&) = delete;

  /// Joins the process group (every rank must, within the timeout). `placement`: the
  /// device of each stage; rank p runs the devices owner() gives it.
  void attach(const std::vector<int>& placement) override;
  bool writes_records() const override { return writes_results(); }
  std::string process_name() const override { return "rank" + std::to_string(options_.rank); }
  /// Each stage's parameters and buffers travel from its rank to the writing rank.
  void gather_weights(std::vector<StageSlot>& slots) override;
  bool any(bool flag) override;
  bool from_writer(bool flag) override;
  std::vector<std::string> gather_text(const std::string& key, const std::string& text) override;
  std::vector<at::Tensor> gather_rows(const at::Tensor& rows) override;
  void merge_stats(ExecStats& stats) override;
  bool runs_stage(int stage) const override { return attached() && stage_owner(stage) == options_.rank; }
  /// Over a c10d subgroup of the members' ranks, one member per rank (a stage's replicas, or
  /// every stage for a model-wide clip or tie; dist/group_all_reduce.h); a plan of one member
  /// stays in this process. Every rank calls it for every plan, in the same order.
  std::shared_ptr<AllReduce> all_reduce(GradientPlan plan) override;

  /// The rank that runs device `device` of `devices` on `world_size` ranks: rank p runs
  /// [p*D/N, (p+1)*D/N).
  static int owner(int device, int devices, int world_size);
  int rank() const { return options_.rank; }
  int size() const { return options_.world_size; }
  bool attached() const { return group_ != nullptr; }
  dist::ProcessGroup& group();
  int stages() const { return static_cast<int>(placement_.size()); }
  int devices() const { return devices_; }
  bool owns_device(int device) const { return owner(device, devices_, options_.world_size) == options_.rank; }
  int stage_owner(int stage) const;
  /// Whether this rank reports the results (it owns the last stage; other ranks send it
  /// theirs after every run).
  bool writes_results() const { return placement_.empty() || stage_owner(stages() - 1) == options_.rank; }

 private:
  /// Brings every process's traced actions and memory peaks to the writer, on its clock.
  void merge_trace(ExecStats& stats);

  dist::GroupOptions options_;
  std::unique_ptr<dist::ProcessGroup> group_;
  /// The all-reduces' subgroups this rank is in, and how many plans all_reduce() has seen.
  std::vector<std::unique_ptr<dist::ProcessGroup>> subgroups_;
  int plans_ = 0;
  std::vector<int> placement_;  ///< the device of each stage, fixed by attach()
  int devices_ = 0;
  /// The writer's next decision (from_writer), received ahead: Gloo moves a message once
  /// its receive is posted, so a receive posted only when the decision is needed would put
  /// a round trip through both processes' Gloo threads at every step's start.
  at::Tensor decision_;
  std::shared_ptr<dist::ProcessGroup::Pending> decision_posted_;
};

}  // namespace pipelab
