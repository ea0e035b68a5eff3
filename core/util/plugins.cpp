#include "core/util/plugins.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "core/util/error.h"

namespace pipelab {
namespace {

std::vector<std::string>& plugins() {
  static std::vector<std::string> loaded;
  return loaded;
}

/// PIPELAB_PLUGINS for the processes this one starts.
void export_plugins() {
  std::string list;
  for (const std::string& p : plugins()) list += (list.empty() ? "" : ":") + p;
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
    throw UserError(fmt::format("plugin {}: there is no such file. Fix: give the shared library your plugin's build "
                                "made (e.g. build/libmy_scheme.so)",
                                path));
  }
  // RTLD_GLOBAL: a later plugin may use what this one defines. The symbols a plugin uses
  // from pipelab resolve against the pipelab command, which exports them.
  if (!::dlopen(absolute.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char* why = ::dlerror();
    throw UserError(fmt::format("plugin {} cannot be loaded: {}. Fix: build it with find_package(pipelab) against "
                                "this pipelab and the same LibTorch (docs/adding-a-scheme.md)",
                                path, why ? why : "unknown reason"));
  }
  plugins().push_back(absolute);
  export_plugins();
}

const std::vector<std::string>& loaded_plugins() { return plugins(); }

void load_inherited_plugins() {
  const char* env = std::getenv("PIPELAB_PLUGINS");
  if (!env || !*env) return;
  const std::string list(env);
  size_t start = 0;
  while (start <= list.size()) {
    const size_t colon = list.find(':', start);
    const std::string one = list.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!one.empty()) load_plugin(one);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
}

}  // namespace pipelab
