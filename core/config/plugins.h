#pragma once
/// Plugins out of tree: a shared library built against pipelab's installed headers
/// (find_package(pipelab), docs/adding-a-scheme.md) whose PIPELAB_REGISTER lines add schemes,
/// models, datasets or codecs to the registries when it is loaded. The pipelab command loads
/// them from `--plugin FILE` and from an experiment's `plugins:` list, and passes them on to
/// the processes it starts (launch, sweep, check) in PIPELAB_PLUGINS.
#include <string>
#include <vector>

namespace pipelab {

/// Loads the shared library at `path` (once; its registrations run as it loads). A file that
/// cannot be loaded, or one that registers a name already taken, is a UserError with the
/// reason and the fix.
void load_plugin(const std::string& path);

/// Notes a registration of a name already taken ("scheme 'gpipe'"); load_plugin reports the
/// ones its library made.
void note_registration_conflict(const std::string& what);

/// The conflicts noted so far (pipelab's own registrations must have none).
const std::vector<std::string>& registration_conflicts();

/// The plugins loaded so far, in order (absolute paths), also in PIPELAB_PLUGINS.
const std::vector<std::string>& loaded_plugins();

/// Loads every plugin PIPELAB_PLUGINS lists (colon-separated; a ':' or '%' inside a path
/// is written %3A or %25): a parent process's.
void load_inherited_plugins();

}  // namespace pipelab
