// core/'s folders form layers: a folder includes only folders below it, so none of them is
// part of a cycle (docs/design.md, "Folders and layers"). A new include that climbs fails
// here, naming the file, the line and the two folders.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace pipelab::layers_test {
namespace {

namespace fs = std::filesystem;

/// Bottom first: each folder may include its own and those listed before it.
const std::vector<std::string> kLayers{"util",    "device", "io",   "config", "schedule", "model",
                                       "comm",    "nn",     "optim", "compress", "data",   "processes",
                                       "stage",   "scheme", "exec", "plan",     "weights", "feed",
                                       "records", "experiment", "assembly", "run"};

/// Calls `seen(line number, match)` for each line of `file` that `include` matches.
void for_each_include(const fs::path& file, const std::regex& include,
                      const std::function<void(int, const std::smatch&)>& seen) {
  std::ifstream in(file);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::smatch m;
    if (std::regex_search(line, m, include)) seen(number, m);
  }
}

TEST(Layers, NoCoreFolderIncludesAFolderAboveIt) {
  std::map<std::string, size_t> rank;
  for (size_t i = 0; i < kLayers.size(); ++i) rank[kLayers[i]] = i;
  const fs::path core = fs::path(PIPELAB_SOURCE_DIR) / "core";
  // Any include of the repository's own folders: core/<folder>/..., and schemes/... or
  // models/... at any depth (a file directly in schemes/ included from core is caught too).
  const std::regex include(R"re(^\s*#\s*include\s+"(core|schemes|models|datasets|tools)/([\w./]+)")re");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(core)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu")) continue;
    const fs::path relative = fs::relative(entry.path(), core);
    if (relative.begin() == relative.end() || std::next(relative.begin()) == relative.end()) continue;  // core/pch.h
    const std::string folder = relative.begin()->string();
    ASSERT_TRUE(rank.count(folder)) << "core/" << folder << " is in no layer: add it to kLayers and docs/design.md";
    ++files;
    for_each_include(entry.path(), include, [&](int number, const std::smatch& m) {
      const std::string where = "core/" + relative.string() + ":" + std::to_string(number);
      if (m[1] != "core") {
        ADD_FAILURE() << where << " includes " << m[1] << "/: core includes none of schemes/, models/, datasets/, tools/";
        return;
      }
      const std::string path = m[2];
      if (path.find('/') == std::string::npos) return;  // core/pch.h
      const std::string target = path.substr(0, path.find('/'));
      ASSERT_TRUE(rank.count(target)) << where << ": core/" << target << " is in no layer";
      EXPECT_LE(rank[target], rank[folder]) << where << ": core/" << folder << " includes core/" << target
                                            << ", a layer above it (move the shared part down)";
    });
  }
  EXPECT_GT(files, 200);
}

// A scheme is one file with one registration line (docs/adding-a-scheme.md): it includes its
// own helpers (schemes/dgl_replay.h from dgl.cpp: a name that starts with its own), the parts
// several schemes share (schemes/shared/) and the schedule generators (schemes/schedules/),
// never another scheme; the shared parts include only each other.
TEST(Layers, ASchemeIncludesNoOtherScheme) {
  const fs::path root = fs::path(PIPELAB_SOURCE_DIR) / "schemes";
  const std::regex include(R"re(^\s*#\s*include\s+"schemes/([\w./]+)")re");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
    const fs::path relative = fs::relative(entry.path(), root);
    const bool shared = relative.begin()->string() == "shared" || relative.begin()->string() == "schedules";
    const std::string stem = entry.path().stem().string();
    ++files;
    for_each_include(entry.path(), include, [&](int number, const std::smatch& m) {
      const std::string target = m[1];
      const bool common = target.rfind("shared/", 0) == 0 || target.rfind("schedules/", 0) == 0;
      const bool own = !shared && target.find('/') == std::string::npos && target.rfind(stem, 0) == 0;
      EXPECT_TRUE(common || own) << "schemes/" << relative.string() << ":" << number << " includes schemes/" << target
                                 << ": a scheme includes no other (move what both use to schemes/shared/)";
    });
  }
  EXPECT_GT(files, 30);
}

}  // namespace
}  // namespace pipelab::layers_test
