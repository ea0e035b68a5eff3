/// What the weight policies, gradient routes and the shadow measured per stage
/// (metrics/stages.csv). In a multi-process run each process measures only the stages it
/// runs; the others' rows reach the writer once per epoch: their names as text, their numbers
/// as rows of doubles (a step or an epoch is exact below 2^53; a value keeps its bits).
#include <fmt/format.h>

#include <map>
#include <sstream>

#include "core/assembly/run_parts.h"
#include "core/feed/shadow_sync.h"
#include "core/run/run_recorder.h"
#include "core/scheme/gradient_route.h"

namespace pipelab {

void RunRecorder::collect_stage_metrics(int epoch) {
  World& world = e_.executor->world();
  const bool writer = world.writes_records();
  std::vector<StageMetric> rows;
  for (size_t r = 0; r < parts_.policies.size(); ++r) {
    // Another process's stage measured nothing here: its rows would be zeros that look real.
    if (!world.runs_stage(static_cast<int>(r))) continue;
    rows.clear();
    parts_.policies[r]->collect(rows);
    if (parts_.routes[r]) parts_.routes[r]->collect(rows);
    if (parts_.shadow) parts_.shadow->collect(static_cast<int>(r), rows);
    if (writer) {
      if (!rows.empty()) record_.stage_metrics(epoch, static_cast<int>(r), rows);
      continue;
    }
    for (StageMetric& m : rows) kept_metrics_.push_back({epoch, static_cast<int>(r), std::move(m)});
  }
}

void RunRecorder::gather_stage_metrics() {
  World& world = e_.executor->world();
  if (world.process_name().empty()) return;
  // The names this process measured, one per line, and a row per metric that points at one.
  std::map<std::string, int> index;
  std::string names;
  at::Tensor rows = at::zeros({static_cast<int64_t>(kept_metrics_.size()), 5}, at::kDouble);
  for (size_t i = 0; i < kept_metrics_.size(); ++i) {
    const KeptMetric& k = kept_metrics_[i];
    const auto [it, fresh] = index.emplace(k.metric.name, static_cast<int>(index.size()));
    if (fresh) names += k.metric.name + "\n";
    const double row[5] = {static_cast<double>(k.epoch), static_cast<double>(k.stage),
                           static_cast<double>(k.metric.step), static_cast<double>(it->second), k.metric.value};
    for (int c = 0; c < 5; ++c) rows[static_cast<int64_t>(i)][c] = row[c];
  }
  kept_metrics_.clear();
  const std::vector<std::string> all_names =
      world.gather_text(fmt::format("stage_metrics{}", metric_rounds_++), names);
  const std::vector<at::Tensor> all_rows = world.gather_rows(rows);
  if (!world.writes_records()) return;
  for (size_t p = 0; p < all_rows.size(); ++p) {
    std::vector<std::string> name;
    std::istringstream in(all_names.at(p));
    for (std::string line; std::getline(in, line);) name.push_back(line);
    const at::Tensor& got = all_rows[p];
    auto a = got.accessor<double, 2>();
    for (int64_t i = 0; i < got.size(0); ++i) {
      StageMetric m{static_cast<int64_t>(a[i][2]), name.at(static_cast<size_t>(a[i][3])), a[i][4]};
      record_.stage_metrics(static_cast<int>(a[i][0]), static_cast<int>(a[i][1]), {m});
    }
  }
}

}  // namespace pipelab
