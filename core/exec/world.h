#pragma once
/// The processes a run spans, as one of them sees them (docs/design.md, "Executors"). An
/// executor's run() moves a schedule's actions; everything else the runner asks of the other
/// processes goes through the executor's World: who writes the run's records, the stages'
/// weights brought to that process, a stop decision shared by all, collectives of text and
/// of numbers, the merge of the executors' statistics, and the all-reduce a gradient plan
/// joins. This base class is the world of one process, where every collective is the
/// identity; core/exec/process_world.h is the world of a c10d process group.
///
/// Numbers cross processes as tensors (gather_rows), never as text, so nothing is parsed
/// and a double keeps its bits; text is for what is text (a resolved configuration).
#include <ATen/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "core/comm/collective.h"

namespace pipelab {

struct StageSlot;
struct ExecStats;

class World {
 public:
  virtual ~World() = default;
  /// Called once the stages are built, with the device of each stage (Scheme::placement):
  /// a multi-process world joins its process group here.
  virtual void attach(const std::vector<int>& /*placement*/) {}
  /// Whether this process writes the run's records (metrics, summary, checkpoints).
  virtual bool writes_records() const { return true; }
  /// "" in one process; else this process's name for its own log folder ("rank1").
  virtual std::string process_name() const { return ""; }
  /// Whether this process runs stage `stage` (its weights, optimizer and policy state are
  /// this process's to save and restore); every stage in one process.
  virtual bool runs_stage(int /*stage*/) const { return true; }
  /// Brings every stage's weights into this process's copies (before a checkpoint). A
  /// collective: every process calls it at the same point.
  virtual void gather_weights(std::vector<StageSlot>& /*slots*/) {}
  /// True on every process when `flag` is true on any (a stop decision all share).
  virtual bool any(bool flag) { return flag; }
  /// The writing process's `flag`, on every process: a decision only the writer can make
  /// (it alone sees the loss). Unlike any(), nobody waits for a round trip: the writer
  /// sends and goes on, and the others find it waiting for them (called at the same points
  /// on every process).
  virtual bool from_writer(bool flag) { return flag; }
  /// Every process's `text` under `key`, in process order (a collective; {text} here).
  virtual std::vector<std::string> gather_text(const std::string& /*key*/, const std::string& text) {
    return {text};
  }
  /// Every process's `rows` (a 2-D CPU tensor: any number of rows, the same columns and
  /// dtype on every process), in process order (a collective; {rows} here).
  virtual std::vector<at::Tensor> gather_rows(const at::Tensor& rows) { return {rows}; }
  /// Adds the other processes' shares of `stats` (the stages and edges they ran) into this
  /// process's (a collective, called once per epoch); when tracing, the writing process also
  /// gets their ActionRecords and memory peaks, on its own clock.
  virtual void merge_stats(ExecStats& /*stats*/) {}
  /// The collective the members of `plan` join at their ALLREDUCE.
  virtual std::shared_ptr<AllReduce> all_reduce(GradientPlan plan) {
    return std::make_shared<LocalAllReduce>(std::move(plan));
  }
};

/// Every process's `values`, in process order, through World::gather_rows.
std::vector<std::vector<int64_t>> gather_values(World& world, const std::vector<int64_t>& values);

}  // namespace pipelab
