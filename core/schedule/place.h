#pragma once
/// Re-placing a schedule's stages on devices (`partition.placement`; docs/design.md,
/// "Placement"): gpipe_test's client holds the first and the last stage of its pipeline on
/// one GPU, the servers the middle ones (docs/schemes.md, "gpipe_test"). A stage's own order of
/// actions is kept, so the numbers are those of the schedule as generated (a scheme's
/// numerics depend only on the order of actions at each stage); only which device runs them
/// changes, and so the step time and the memory per device.
#include <string>
#include <vector>

#include "core/config/fields.h"
#include "core/schedule/schedule.h"

namespace pipelab {

/// `partition.placement`: the scheme's own (default), gpipe_test's client_server, or a device
/// per stage.
struct Placement {
  enum class Kind { Scheme, ClientServer, Listed } kind = Kind::Scheme;
  std::vector<int> devices;  ///< Listed: the device of each pipeline stage
  /// The device of each of `stages` pipeline stages; empty for Kind::Scheme. A list of the
  /// wrong length, or one that leaves a device out, is a std::invalid_argument saying so.
  std::vector<int> resolve(int stages) const;
};

template <>
struct ConfigValue<Placement> {
  static std::string type() { return "scheme, client_server, or a device per stage like [0, 1, 2, 0]"; }
  static Placement read(const ConfigNode& n);
  static YAML::Node write(const Placement& p);
};

/// `s` (complete, or lowered here) with stage r's actions on device placement[r]. Each new
/// device runs the actions of its stages in the order of their times in a replay of `s`
/// under unit costs (F 1, B 2, U 0.25, H 0.5; a message arrives when it is sent), so every
/// action comes after everything it waits for and the result cannot deadlock; each stage's
/// own order, messages included, is unchanged.
Schedule place_stages(const Schedule& s, const std::vector<int>& placement);

}  // namespace pipelab
