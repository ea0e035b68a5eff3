#pragma once
/// Where a run resumes when several processes each keep the state of their own stages.
/// Every process saves its state after every epoch, one after the other, so a kill can
/// come between two processes' saves and leave them an epoch apart. Each therefore keeps
/// the state before its latest too (state.prev.pt), and on --resume the processes agree on
/// the newest epoch every one of them holds. In one process this is the latest state.
#include <functional>
#include <string>

#include "core/exec/world.h"

namespace pipelab {

/// Saves this process's state for the epoch just finished to `path` with `save`, keeping
/// the one it replaces at prev_state_path(path).
void save_state_keeping_previous(const std::string& path, const std::function<void(const std::string&)>& save);

std::string prev_state_path(const std::string& path);

/// The epochs every process of `world` holds a state after (a collective), and leaves that
/// state at `path` on this process, removing any newer one; 0 with no state left behind
/// when they share none (the run starts afresh).
int agree_resume_epoch(World& world, const std::string& path);

}  // namespace pipelab
