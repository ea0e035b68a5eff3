/// libFuzzer target for the schedule text and CSV readers and the validator
/// (core/schedule/): any input must parse and validate, or give a UserError. A crash, a hang,
/// a sanitizer report or any other exception is a finding. A schedule that passes the
/// validator must also keep the promises the executors rely on: the dataflow walk visits
/// every action (no deadlock slipped through), the timeline replays it, and its text form
/// reads back as the same schedule. The first byte picks the form (odd: CSV) and the rules
/// (a pipeline's, or replicas' with ALLREDUCE, or anything). Built by tools/fuzz/build.sh.
#include <cstdint>
#include <string>

#include "core/schedule/dataflow.h"
#include "core/schedule/lower.h"
#include "core/schedule/timeline.h"
#include "core/schedule/validate.h"
#include "core/util/error.h"

namespace {

[[noreturn]] void finding(const char* what) {
  fprintf(stderr, "finding: %s\n", what);
  __builtin_trap();
}

pipelab::ValidateOptions rules(uint8_t pick) {
  using pipelab::ActionKind;
  pipelab::ValidateOptions o;
  switch (pick % 3) {
    case 0:  // a synchronous pipeline (scheme: custom)
      o.kinds = {ActionKind::Forward, ActionKind::Backward, ActionKind::BackwardInput, ActionKind::BackwardWeight,
                 ActionKind::Update};
      o.training = true;
      o.coverage = pipelab::Coverage::EveryStage;
      o.one_update = true;
      break;
    case 1:  // replicas of a pipeline (the schedule is read as two replicas when it can be)
      o.kinds = {ActionKind::Forward, ActionKind::Backward, ActionKind::Update, ActionKind::AllReduce};
      o.training = true;
      o.coverage = pipelab::Coverage::EveryStage;
      break;
    default: break;  // anything goes
  }
  if (pick & 4) o.max_in_flight.assign(8, 2);
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t pick = data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  pipelab::Schedule s;
  try {
    s = (pick & 1) ? pipelab::Schedule::parse_csv(text, "fuzz.csv") : pipelab::Schedule::parse(text, "fuzz.sched");
    if ((pick >> 1) % 3 == 1 && s.stages() % 2 == 0) s.set_replicas(2);
    pipelab::validate_schedule(s, rules(static_cast<uint8_t>(pick >> 1)));
  } catch (const pipelab::UserError&) {
    return 0;
  }
  const pipelab::Schedule complete = pipelab::with_communication(s);
  size_t actions = 0, visited = 0;
  for (int d = 0; d < complete.devices(); ++d) actions += complete.device(d).size();
  if (!pipelab::walk_schedule(complete, [&](int, size_t) { ++visited; }).complete || visited != actions) {
    finding("a validated schedule does not run to its end");
  }
  try {
    pipelab::simulate_timeline(complete, pipelab::CostModel::uniform(complete.stages(), 1, 2));
  } catch (const pipelab::UserError&) {
    finding("the timeline refuses a validated schedule");
  }
  pipelab::Schedule back = pipelab::Schedule::parse(s.to_text(), "round-trip");
  back.copy_layout(s);
  if (!(back == s)) finding("the text form does not read back");
  return 0;
}
