#pragma once
/// `pipelab simulate`'s comparison across schemes: a Markdown table (readable in a terminal
/// and pasteable into docs) and the per-device memory lines under it.
#include <string>
#include <vector>

#include "tools/simulate/simulate.h"

namespace pipelab::sim {

/// One scheme's outcome: its result, or why it could not be simulated.
struct SchemeRow {
  std::string name;  ///< as given ("gpipe", "interleaved_1f1b:virtual_stages=2")
  SimResult result;
  std::string error;  ///< non-empty: not simulated
};

/// | scheme | devices | units | step (ms) | samples/s | bubble | peak memory (GiB, max device) | ...
std::string markdown_table(const std::vector<SchemeRow>& rows);

/// "gpipe: peak per device (GiB) 1.20 1.18 ..." per simulated scheme.
std::string memory_lines(const std::vector<SchemeRow>& rows);

/// "out.svg" for one scheme; "out-gpipe.svg" (the name's characters outside [A-Za-z0-9_.=-]
/// replaced) when several schemes share the path.
std::string per_scheme_path(const std::string& path, const std::string& scheme, bool several);

/// The replay's actions as the Chrome trace `pipelab run` writes (core/records/trace.h).
std::string simulated_trace(const SimResult& r);

}  // namespace pipelab::sim
