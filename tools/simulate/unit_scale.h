#pragma once
/// What one unit of a schedule costs against one unit of the costs (UnitScale): the share of
/// a micro-batch's seconds, kept bytes and message bytes a sequence segment takes.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "core/plan/run_plan.h"
#include "core/util/error.h"
#include "tools/simulate/costs.h"

namespace pipelab::sim {

/// What one unit of the schedule costs against one unit of the costs. Units are micro-batches
/// unless the plan cuts sequences into segments (core/scheme/sequence_split.h): segment j then
/// does its share of the micro-batch's work and carries its share of the tokens (messages).
/// The work's share is the cost model's (the computation-wise partition, docs/schemes.md, "Notation and optimizers")
/// for the activations a segment keeps, which grow with the keys its queries read as the work
/// does, and for its seconds unless the costs were measured in as many segments (then each
/// stage's measured shares, StageCosts::segment_shares) or derived from blocks timed at
/// several sizes (add_timed_shares). Costs measured in segments are one segment's on average:
/// k_c of them make a micro-batch.
///
/// Ragged text: `lengths` gives the length of each micro-batch's sequences (cycled over the
/// step's micro-batches, the tokens per row a padded micro-batch computes), and a unit's
/// seconds and bytes scale by that length against the costs' sequence length: linear in the
/// tokens, as the projections and feed-forward that dominate a decoder are.
class UnitScale {
 public:
  UnitScale(const RunPlan& plan, const SimCosts& c, const std::vector<double>& lengths = {}) {
    set_lengths(plan, c, lengths);
    const SequenceSplit& split = plan.sequence_split();
    if (!split.active() && c.segments <= 1) return;
    const double measured = std::max(1, c.segments);
    if (!split.active()) {
      work_ = tokens_ = {measured};
      return;
    }
    if (c.sequence_length >= 1 && c.sequence_length < split.segments) {
      // A length, but shorter than the segments: each needs a token of its own.
      throw UserError(
          fmt::format("scheme {} cuts each sequence into {} segments, but the sequences have {} tokens. "
                      "Fix: use at most {} segments",
                      plan.scheme().type(), split.segments, static_cast<int64_t>(c.sequence_length),
                      static_cast<int64_t>(c.sequence_length)));
    }
    if (c.sequence_length < split.segments) {
      throw UserError(
          fmt::format("scheme {} cuts each sequence into {} segments, but the costs ({}) give no sequence "
                      "length to cut. Fix: use costs measured by a run of a sequence model "
                      "(metrics/costs.json) or derived from one",
                      plan.scheme().type(), split.segments, c.source));
    }
    const int64_t length = static_cast<int64_t>(c.sequence_length);
    const std::vector<int64_t> cuts = split.cuts(length);
    const double whole = split.work(0, length);
    for (int j = 0; j < split.segments; ++j) {
      work_.push_back(split.work(cuts[static_cast<size_t>(j)], cuts[static_cast<size_t>(j) + 1]) / whole * measured);
      tokens_.push_back(static_cast<double>(cuts[static_cast<size_t>(j) + 1] - cuts[static_cast<size_t>(j)]) /
                        static_cast<double>(length) * measured);
    }
    if (c.segments == 1) add_timed_shares(c);
    if (c.segments != split.segments) return;
    for (const StageCosts& k : c.stages) {
      std::vector<double> shares;
      if (k.segment_shares.size() == static_cast<size_t>(split.segments)) {
        for (const double x : k.segment_shares) shares.push_back(x * measured);
      }
      seconds_.push_back(shares);
    }
  }
  /// Of an action's seconds, of the bytes it keeps, of its messages' bytes.
  double seconds(const Action& a) const {
    const size_t st = static_cast<size_t>(a.stage);
    return (st < seconds_.size() && !seconds_[st].empty() ? of(seconds_[st], a) : of(work_, a)) * length(a);
  }
  double work(const Action& a) const { return of(work_, a) * length(a); }
  double tokens(const Action& a) const { return of(tokens_, a) * length(a); }

 private:
  void set_lengths(const RunPlan& plan, const SimCosts& c, const std::vector<double>& lengths) {
    if (lengths.empty()) return;
    if (c.ragged) {
      throw UserError(fmt::format("--tokens gives the length of each micro-batch's sequences, but the costs ({}) were "
                                  "measured on ragged text: each figure is already the mean over the run's "
                                  "micro-batches of differing lengths, which --tokens would scale a second time. "
                                  "Fix: drop --tokens to replay the run's own mix, or cost other lengths from a run "
                                  "of fixed-length windows (dataset.collate: windows) or derived costs (--cluster)",
                                  c.source));
    }
    if (c.sequence_length < 1) {
      throw UserError(fmt::format("--tokens gives the length of each micro-batch's sequences, but the costs ({}) give "
                                  "no sequence length to scale. Fix: use costs of a sequence model (measured by a "
                                  "run of one, or derived from one)",
                                  c.source));
    }
    for (const double l : lengths) {
      if (!(l >= 1 && l <= c.sequence_length)) {
        throw UserError(fmt::format("--tokens {:g}: a micro-batch's sequences are 1 to {:g} tokens long (the "
                                    "costs' length). Fix: give each micro-batch's length",
                                    l, c.sequence_length));
      }
      lengths_.push_back(l / c.sequence_length);
    }
    per_micro_batch_ = std::max(1, plan.sequence_split().segments);
  }
  /// Unit a's micro-batch's length against the costs'.
  double length(const Action& a) const {
    if (lengths_.empty() || a.mb < 0) return 1.0;
    return lengths_[static_cast<size_t>(a.mb / per_micro_batch_) % lengths_.size()];
  }
  /// Costs from blocks timed at several sizes (StageCosts::timed_seconds): each stage's
  /// segment j costs what n t_j examples of whole sequences cost (n the micro-batch's
  /// examples, t_j the segment's share of the tokens), times its work per token against the
  /// whole sequence's (w_j / t_j), as a share of the micro-batch's seconds. With costs linear
  /// in the examples that is w_j; short segments cost more, by their kernels' fixed costs.
  void add_timed_shares(const SimCosts& c) {
    const double n = c.micro_batch_size;
    for (const StageCosts& k : c.stages) {
      std::vector<double> shares;
      const double whole = k.timed_seconds.empty() || n <= 0 ? 0.0 : k.timed_seconds.at(n);
      for (size_t j = 0; whole > 0 && j < work_.size(); ++j) {
        shares.push_back(k.timed_seconds.at(n * tokens_[j]) / whole * work_[j] / tokens_[j]);
      }
      seconds_.push_back(shares);
    }
  }
  static double of(const std::vector<double>& per_segment, const Action& a) {
    if (per_segment.empty() || a.mb < 0) return 1.0;
    return per_segment[static_cast<size_t>(a.mb) % per_segment.size()];
  }
  std::vector<double> work_, tokens_;
  std::vector<std::vector<double>> seconds_;  ///< per stage, measured
  std::vector<double> lengths_;               ///< per micro-batch, against the costs' length
  int per_micro_batch_ = 1;                   ///< units
};

}  // namespace pipelab::sim
