#include "core/config/plugins.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "core/io/input_file.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

std::vector<std::string>& plugins() {
  static std::vector<std::string> loaded;
  return loaded;
}

std::vector<std::string>& conflicts() {
  static std::vector<std::string> noted;
  return noted;
}

/// A path as one entry of PIPELAB_PLUGINS: ':' separates entries, so a ':' inside a path is
/// escaped (and '%', the escape itself).
std::string escaped(const std::string& path) {
  std::string out;
  for (const char c : path) out += c == ':' ? "%3A" : c == '%' ? "%25" : std::string(1, c);
  return out;
}

std::string unescaped(const std::string& entry) {
  std::string out;
  for (size_t i = 0; i < entry.size(); ++i) {
    if (entry.compare(i, 3, "%3A") == 0 || entry.compare(i, 3, "%3a") == 0) {
      out += ':';
      i += 2;
    } else if (entry.compare(i, 3, "%25") == 0) {
      out += '%';
      i += 2;
    } else {
      out += entry[i];
    }
  }
  return out;
}

/// PIPELAB_PLUGINS for the processes this one starts.
void export_plugins() {
  std::string list;
  for (const std::string& p : plugins()) list += (list.empty() ? "" : ":") + escaped(p);
  ::setenv("PIPELAB_PLUGINS", list.c_str(), 1);
}

}  // namespace

void load_plugin(const std::string& path) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::error_code error;
  const std::string absolute = std::filesystem::absolute(path, error).lexically_normal().string();
  for (const std::string& p : plugins()) {
    if (p == absolute) return;
  }
  if (!std::filesystem::is_regular_file(absolute, error)) {
    // What is there instead: nothing, a folder, a loop of links (each named by its reader).
    try {
      check_input_file(absolute);
    } catch (const UserError& e) {
      throw UserError(fmt::format("plugin {}: {}", path, e.what()));
    }
  }
  // RTLD_GLOBAL: a later plugin may use what this one defines. The symbols a plugin uses
  // from pipelab resolve against the pipelab command, which exports them.
  const size_t conflicts_before = conflicts().size();
  if (!::dlopen(absolute.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char* why = ::dlerror();
    throw UserError(fmt::format("plugin {} cannot be loaded: {}. Fix: build it with find_package(pipelab) against "
                                "this pipelab and the same LibTorch (docs/adding-a-scheme.md)",
                                path, why ? why : "unknown reason"));
  }
  if (conflicts().size() > conflicts_before) {
    // Its other registrations stay (their code is in the library, which stays loaded); the
    // command stops here, so none of them is used.
    const std::vector<std::string> taken(conflicts().begin() + static_cast<int64_t>(conflicts_before), conflicts().end());
    throw UserError(fmt::format("plugin {} registers {}, a name pipelab or an earlier plugin already has. Fix: give "
                                "it another name in the plugin's PIPELAB_REGISTER line",
                                path, fmt::join(taken, ", ")));
  }
  plugins().push_back(absolute);
  export_plugins();
}

void note_registration_conflict(const std::string& what) { conflicts().push_back(what); }

const std::vector<std::string>& registration_conflicts() { return conflicts(); }

const std::vector<std::string>& loaded_plugins() { return plugins(); }

void load_inherited_plugins() {
  const char* env = std::getenv("PIPELAB_PLUGINS");
  if (!env || !*env) return;
  const std::string list(env);
  size_t start = 0;
  while (start <= list.size()) {
    const size_t colon = list.find(':', start);
    const std::string one = list.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!one.empty()) load_plugin(unescaped(one));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
}

}  // namespace pipelab
