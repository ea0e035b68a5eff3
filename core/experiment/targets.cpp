/// Time to a target (core/experiment/targets.h).
#include "core/experiment/targets.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/records/run_record.h"

namespace pipelab {

void TargetOptions::check(const ConfigNode& node) const {
  const auto in_percent = [&node](const char* key, const std::optional<double>& v, double lo) {
    if (!v) return;
    if (!std::isfinite(*v) || *v < lo || *v > 100) {
      node.child(key).fail(fmt::format("must be a number from {:g} to 100 (percent), got {:g}", lo, *v),
                           fmt::format("set run.targets.{} to a percentage, as epochs.csv writes it", key));
    }
    if (lo >= 0 && *v <= 1) {
      node.child(key).fail(fmt::format("{:g} is {:g}% accuracy: the column is in percent", *v, *v),
                           fmt::format("write {:g} for {:g}%", *v * 100, *v * 100));
    }
  };
  in_percent("test_acc", test_acc, 0);
  in_percent("train_acc", train_acc, 0);
  in_percent("test_mcc", test_mcc, -100);
  for (const auto& [key, v] : {std::pair{"test_loss", test_loss}, std::pair{"train_loss", train_loss}}) {
    if (v && (!std::isfinite(*v) || *v < 0)) {
      node.child(key).fail(fmt::format("must be a finite loss >= 0, got {:g}", *v),
                           fmt::format("set run.targets.{} to the loss to get down to", key));
    }
  }
}

namespace {

/// When `history` first reached `target` of `field`.
TargetReached reached(const std::string& metric, double target, bool at_least, double EpochMetrics::*field,
                      const std::vector<EpochMetrics>& history) {
  TargetReached r{metric, target, at_least};
  double train = 0, simulated = 0, last = std::nan("");
  for (const EpochMetrics& m : history) {
    const double v = m.*field;
    const bool past = std::isfinite(v) && (at_least ? v >= target : v <= target);
    if (past) {
      r.reached = true;
      r.epoch = m.epoch;
      // Linear between the evaluation before and this one; at the first, this one's time.
      double share = 1;
      if (std::isfinite(last) && v != last) {
        share = std::clamp((target - last) / (v - last), 0.0, 1.0);
        r.interpolated = true;
      }
      r.train_seconds = train + share * m.train_seconds;
      r.simulated_seconds = simulated + share * m.simulated_seconds;
      return r;
    }
    train += m.train_seconds;
    simulated += m.simulated_seconds;
    last = v;
  }
  r.train_seconds = r.simulated_seconds = std::nan("");
  return r;
}

}  // namespace

std::string describe(const TargetReached& t, int epochs) {
  const std::string what = fmt::format("{} {} {:g}", t.metric, t.at_least ? ">=" : "<=", t.target);
  if (!t.reached) return fmt::format("{}: not reached in {} epoch{}", what, epochs, epochs == 1 ? "" : "s");
  std::string out = fmt::format(
      "{}: epoch {}, {:.3g} s of training{}", what, t.epoch, t.train_seconds,
      std::isfinite(t.simulated_seconds) ? fmt::format(" here, {:.3g} s simulated", t.simulated_seconds) : "");
  return out + (t.interpolated ? "" : " (at the first evaluation: an upper bound)");
}

std::vector<TargetReached> time_to_targets(const TargetOptions& t, const std::vector<EpochMetrics>& history) {
  std::vector<TargetReached> out;
  const auto add = [&](const char* metric, const std::optional<double>& v, bool at_least, double EpochMetrics::*field) {
    if (v) out.push_back(reached(metric, *v, at_least, field, history));
  };
  add("test_acc", t.test_acc, true, &EpochMetrics::test_acc);
  add("train_acc", t.train_acc, true, &EpochMetrics::train_acc);
  add("test_mcc", t.test_mcc, true, &EpochMetrics::test_mcc);
  add("test_loss", t.test_loss, false, &EpochMetrics::test_loss);
  add("train_loss", t.train_loss, false, &EpochMetrics::train_loss);
  return out;
}

}  // namespace pipelab
