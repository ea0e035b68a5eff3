#pragma once
/// Where pipelab keeps what it can make again (model profiles, proxy runs, encoded datasets):
/// one folder per user, never beside the inputs, which may be read-only or shared.
#include <string>

namespace pipelab {

/// $PIPELAB_CACHE, else $XDG_CACHE_HOME/pipelab, else ~/.cache/pipelab (else .pipelab-cache
/// where no home is known).
std::string cache_folder();

}  // namespace pipelab
