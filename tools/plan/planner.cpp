/// The planner's search (tools/plan/planner.h): enumerate, prune, replay, cut.
#include "tools/plan/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "core/config/registry.h"
#include "tools/plan/candidates.h"
#include "tools/plan/cut_search.h"
#include "tools/plan/offload_fit.h"
#include "tools/plan/recompute_fit.h"

namespace pipelab::plan {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// Why a simulated candidate cannot be ranked under the constraints ("" when it can).
std::string constraint_lost(const Candidate& c, const PlanSpace& space) {
  if (space.memory_cap > 0 && c.peak > space.memory_cap) {
    // A flushed candidate has tried recomputing its fullest device's stages (recompute_fit.h).
    return fmt::format("memory: its peak {} exceeds the cap {} by {}{}", bytes_text(c.peak),
                       bytes_text(space.memory_cap), bytes_text(c.peak - space.memory_cap),
                       !c.flushed    ? ""
                       : space.offload ? ", and neither recomputing nor offloading stages brings it under"
                                       : ", and recomputing stages does not bring it under");
  }
  if (c.staleness > space.max_staleness) {
    return fmt::format("staleness: gradients {} weight versions stale, more than {}", c.staleness,
                       space.max_staleness);
  }
  return "";
}

bool faster(const Candidate& a, const Candidate& b) { return ranks_before(a, b); }

/// Makes `c` fit the memory cap with the faster of the two levers, recomputing stages or
/// offloading them (when the host link is known); returns the replays made.
int64_t fit_memory(Candidate& c, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
                   const sim::SimOptions& options) {
  Candidate offloaded = c;
  int64_t replays = offload_to_fit(offloaded, e, space, costs_of, options);
  replays += recompute_to_fit(c, e, space, costs_of, options);
  const double cap = space.memory_cap;
  const bool offload_fits = !offloaded.offload.empty() && offloaded.peak <= cap;
  if (offload_fits && (c.peak > cap || offloaded.step < c.step)) c = std::move(offloaded);
  return replays;
}

}  // namespace

bool ranks_before(const Candidate& a, const Candidate& b) {
  const auto rounded = [](double s) { return std::stod(fmt::format("{:.6g}", s)); };
  const double x = rounded(a.step), y = rounded(b.step);
  if (x != y) return x < y;
  if (a.topology.devices != b.topology.devices) return a.topology.devices < b.topology.devices;
  if (a.stages != b.stages) return a.stages < b.stages;
  return a.peak < b.peak;
}

std::vector<std::string> default_schemes(bool async, bool sequences) {
  // The registry's schemes, by what each declares of itself (Scheme::numerics, its
  // sequence split): a plugin's scheme is planned as a built-in one is. A scheme that cannot
  // be made from its type alone (a schedule file to name) is planned only when named.
  std::vector<std::string> out;
  for (const std::string& type : Registry<Scheme>::get().names()) {
    YAML::Node section(YAML::NodeType::Map);
    section["type"] = type;
    std::unique_ptr<Scheme> scheme;
    try {
      scheme = make_scheme(section);
    } catch (const UserError&) {
      continue;
    }
    const Numerics numerics = scheme->numerics();
    if (numerics == Numerics::Other || (numerics == Numerics::Asynchronous && !async)) continue;
    section["segments"] = 2;
    bool cuts_sequences = false;
    try {
      cuts_sequences = make_scheme(section)->sequence_split().active();
    } catch (const UserError&) {
    }
    if (cuts_sequences && !sequences) continue;
    out.push_back(type);
  }
  return out;
}

PlanResult search(const Experiment& e, const PlanSpace& space, const CostsOf& costs_of, const sim::SimOptions& given,
                  const OnProgress& on_progress) {
  const auto start = std::chrono::steady_clock::now();
  // The search replays schedules the run plan made without validating each (validation is
  // most of a replay's time); what it ranks in its table is replayed again, validated.
  // Ragged text: every replay costs each micro-batch at the step's mean length.
  sim::SimOptions validated = given;
  if (space.token_length > 0) validated.lengths = {space.token_length};
  sim::SimOptions options = validated;
  options.validate = false;
  options.one_replica = true;  // identical replicas: one replayed, its figures for all
  PlanResult out;
  std::vector<Candidate> pending = enumerate(e, space, out.lost);
  out.timed_out = seconds_since(start) > space.time_limit;  // enumerating took it all
  out.enumerated = static_cast<int64_t>(pending.size() + out.lost.size());
  // Analytic figures first: what cannot fit is out before any replay, and the rest is
  // replayed from the lowest bound up.
  std::vector<Candidate> viable;
  for (Candidate& c : pending) {
    if (seconds_since(start) > space.time_limit) {
      // The limit holds here too: a candidate not costed is not ranked, and says why.
      out.timed_out = true;
      c.lost = "not costed: the time limit (--time-limit) ran out first";
      out.lost.push_back(std::move(c));
    } else if (!analytic(c, e, space, costs_of)) {
      out.lost.push_back(std::move(c));
    } else if (space.memory_cap > 0 && c.static_bytes > space.memory_cap) {
      c.lost = fmt::format("memory: weights, gradients and optimizer state alone take {}, over the cap {} by {}",
                           bytes_text(c.static_bytes), bytes_text(space.memory_cap),
                           bytes_text(c.static_bytes - space.memory_cap));
      out.lost.push_back(std::move(c));
    } else {
      viable.push_back(std::move(c));
    }
  }
  std::stable_sort(viable.begin(), viable.end(), [](const Candidate& a, const Candidate& b) { return a.bound < b.bound; });
  // The steps of the ranked candidates so far, sorted: one list, or (rank_apart) one per
  // kind of numerics, so that the best synchronous plans are ranked beside faster
  // asynchronous ones that may need more steps (`plan --target`).
  std::vector<double> fastest, fastest_synchronous;
  const auto steps_of = [&](const Candidate& c) -> std::vector<double>& {
    return space.rank_apart && c.scheme->numerics() == Numerics::Synchronous ? fastest_synchronous : fastest;
  };
  int64_t done = 0;
  for (Candidate& c : viable) {
    ++done;
    std::vector<double>& best = steps_of(c);
    const double kth = static_cast<int>(best.size()) >= space.top ? best[static_cast<size_t>(space.top - 1)] : INFINITY;
    if (c.bound > kth * (1 + 1e-6)) {  // an equal bound may still tie, and win by simplicity
      c.lost = fmt::format("bound: it needs at least {} a step, more than #{}'s whole step ({})",
                           seconds_text(c.bound), space.top, seconds_text(kth));
    } else if (seconds_since(start) > space.time_limit) {
      out.timed_out = true;
      c.lost = "not replayed: the time limit (--time-limit) ran out first";
    } else if (replay(c, e, space, costs_of, options)) {
      ++out.simulated;
      out.simulated += fit_memory(c, e, space, costs_of, options);
      c.lost = constraint_lost(c, space);
      if (c.lost.empty()) best.insert(std::upper_bound(best.begin(), best.end(), c.step), c.step);
    }
    if (on_progress) {
      const double first = std::min(fastest.empty() ? INFINITY : fastest.front(),
                                    fastest_synchronous.empty() ? INFINITY : fastest_synchronous.front());
      on_progress(done, static_cast<int64_t>(viable.size()), std::isfinite(first) ? first : 0);
    }
    (c.lost.empty() ? out.ranked : out.lost).push_back(std::move(c));
  }
  std::stable_sort(out.ranked.begin(), out.ranked.end(), faster);
  // The partition of the best, searched on their own schedules.
  CutSearch cuts{e, space, costs_of, options, start};
  for (size_t i = 0; i < out.ranked.size() && i < 4; ++i) out.simulated += cuts.improve(out.ranked[i]);
  std::stable_sort(out.ranked.begin(), out.ranked.end(), faster);
  for (size_t i = 0; i < out.ranked.size() && static_cast<int>(i) < space.top; ++i) {
    if (!replay(out.ranked[i], e, space, costs_of, validated)) {
      throw InternalError(fmt::format("the schedule of {} failed validation: {}", out.ranked[i].label, out.ranked[i].lost));
    }
  }
  out.seconds = seconds_since(start);
  return out;
}

}  // namespace pipelab::plan
