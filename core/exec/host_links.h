#pragma once
/// Which pairs of the distributed executor's ranks exchange their host bytes through shared
/// memory (dist/shm_link.h) and which through Gloo (run.executor.backend), decided alike on
/// every rank at the first run, as exec/device_channels.h decides NCCL.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "core/processes/shm_link.h"
#include "core/exec/process_world.h"
#include "core/schedule/schedule.h"

namespace pipelab {

class HostLinks {
 public:
  /// At the first call: every pair of ranks that exchange messages in `s` (either way) gets
  /// a link each way when the two are on one host and its /dev/shm can hold the rings.
  /// `backend` gloo makes none; shm needs every such pair to get one (a UserError names the
  /// pair and why it cannot); auto and nccl take what they can and use Gloo elsewhere.
  void connect(const std::string& backend, ProcessWorld& world, const Schedule& s, const dist::ShmOptions& options);
  /// The end of this rank's link to or from `rank`, or null (Gloo).
  dist::ShmLink* to(int rank) const;
  dist::ShmLink* from(int rank) const;
  /// Stops every wait on the links (a run that failed elsewhere); reset() allows them again.
  void abort();
  void reset();
  /// The rank pairs (sender, receiver) linked, for the run's log.
  std::set<std::pair<int, int>> linked() const;

 private:
  bool connected_ = false;
  std::map<int, std::unique_ptr<dist::ShmLink>> out_, in_;
  std::set<std::pair<int, int>> linked_;
};

/// What tells this machine apart from another (its host name and boot id): ranks with the
/// same may share memory.
std::string host_identity();

}  // namespace pipelab
