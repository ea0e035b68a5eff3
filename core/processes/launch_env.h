#pragma once
/// Where a process's place in a multi-process run comes from when pipelab did not start it:
/// the environment the ecosystem's launchers set. torchrun (and anything that sets up
/// torch.distributed's env:// rendezvous) exports RANK, WORLD_SIZE, LOCAL_RANK,
/// LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT; SLURM's srun exports SLURM_PROCID,
/// SLURM_NTASKS and SLURM_LOCALID and names the job's hosts in SLURM_JOB_NODELIST.
#include <functional>
#include <optional>
#include <string>

#include "core/processes/process_group.h"

namespace pipelab::dist {

struct LaunchEnv {
  std::string launcher;  ///< "torchrun" or "SLURM", for messages
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  /// Processes on this machine (LOCAL_WORLD_SIZE, SLURM_NTASKS_PER_NODE); 0 when unknown.
  int local_world_size = 0;
  Endpoint master;
  /// torchrun's agent serves the store at `master` (TORCHELASTIC_USE_AGENT_STORE): every
  /// rank joins it as a client, rank 0 included, as torch.distributed's env:// does.
  bool agent_store = false;
  /// How often torchrun restarted the group (TORCHELASTIC_RESTART_COUNT): > 0 means an
  /// earlier attempt failed and this one continues its run.
  int restart_count = 0;
};

/// Reads a variable; null when unset (std::getenv by default; tests pass their own).
using Getenv = std::function<const char*(const char*)>;

/// The launcher's environment, or nothing when no launcher set one. A half-set environment
/// (RANK without WORLD_SIZE, SLURM_PROCID without SLURM_NTASKS, no master address) and a
/// value that is not a number are UserErrors naming the variable and the fix.
std::optional<LaunchEnv> launch_env(const Getenv& get);
std::optional<LaunchEnv> launch_env();

/// The first host of a SLURM host list ("node[07-09,12],gpu3" -> "node07").
std::string first_slurm_host(const std::string& nodelist);

}  // namespace pipelab::dist
