#pragma once
/// A scheme with its stages re-placed on devices (`partition: {placement: client_server}` or
/// `[0, 1, 2, 0]`; core/schedule/place.h). It is the scheme itself in every respect but two:
/// placement() is the one asked for, and schedule() is the scheme's schedule merged onto those
/// devices. The experiment wraps its scheme once, where it reads the file, so the runner, the
/// executors, `describe`, `schedule` and `simulate` see one more scheme and no new branch.
#include <memory>

#include "core/config/config_node.h"
#include "core/schedule/place.h"
#include "core/scheme/scheme.h"

namespace pipelab {

/// `scheme` as placed by `placement` (read at `where`, for errors); `scheme` itself when the
/// placement is the scheme's own.
std::unique_ptr<Scheme> placed_scheme(std::unique_ptr<Scheme> scheme, const Placement& placement,
                                      const ConfigNode& where);

}  // namespace pipelab
