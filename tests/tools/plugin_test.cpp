// A scheme out of tree: examples/plugin, built as a repository of its own against
// `cmake --install` of this build (find_package(pipelab)), loads into the pipelab command with
// --plugin or an experiment's `plugins:`, and passes `pipelab check scheme`.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/processes/process_group.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace fs = std::filesystem;

namespace pipelab::plugin_test {
namespace {

TEST(Plugin, TheExampleBuildsOutOfTreeLoadsAndPassesTheChecks) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers (the check's two-process run needs them)";
  testing::TempDir dir;
  const std::string build = fs::path(PIPELAB_BINARY).parent_path().string();
  // Binaries carried to another machine without their build tree (docs/gpu.md's recipe)
  // have nothing to install from.
  if (!fs::exists(build + "/cmake_install.cmake")) GTEST_SKIP() << "no build tree at " << build << " to install from";
  const auto run = [](const std::string& command) {
    const auto [code, out] = testing::shell(command + " 2>&1");
    EXPECT_EQ(code, 0) << command << "\n" << out;
    return code == 0;
  };
  ASSERT_TRUE(run(fmt::format("cmake --install '{}' --prefix '{}'", build, dir.file("inst"))));
  ASSERT_TRUE(fs::exists(dir.file("inst/include/pipelab/core/scheme/scheme.h")));
  ASSERT_TRUE(fs::exists(dir.file("inst/lib/cmake/pipelab/pipelabConfig.cmake")));
  // The example as a user's checkout: its own folder, its own build.
  fs::copy(PIPELAB_SOURCE_DIR "/examples/plugin", dir.file("example"), fs::copy_options::recursive);
  ASSERT_TRUE(run(fmt::format("cmake -S '{0}' -B '{0}/build' -G Ninja -DCMAKE_BUILD_TYPE=Release "
                              "-DCMAKE_PREFIX_PATH='{1}'",
                              dir.file("example"), dir.file("inst"))));
  ASSERT_TRUE(run(fmt::format("cmake --build '{}/build'", dir.file("example"))));
  const std::string library = dir.file("example/build/libmicro_naive.so");
  ASSERT_TRUE(fs::exists(library));

  auto [code, out] = testing::pipelab("check scheme micro_naive --set scheme.chunks=2 --plugin " + library);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("every check passed"), std::string::npos) << out;
  // Accumulated micro-batch gradients: `single` on the whole mini-batch, in float64.
  const size_t one = out.find("1 stage vs single (float64)");
  ASSERT_NE(one, std::string::npos) << out;
  EXPECT_NE(out.substr(one, out.find('\n', one) - one).find(" ok ("), std::string::npos) << out;
  // Listed by an experiment (relative to its folder), and recorded in config.yaml.
  std::tie(code, out) = testing::pipelab(fmt::format("run '{}' --set run.output='{}' --quiet",
                                                     dir.file("example/experiment.yaml"), dir.file("run")));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(testing::read_text(dir.file("run/config.yaml")).find("libmicro_naive.so"), std::string::npos);
  // The planner asks the registry what each scheme is (Scheme::numerics): the plugin's
  // synchronous scheme is planned by default, as a built-in one is.
  std::tie(code, out) = testing::pipelab(fmt::format("plan '{}' --devices 2 --device-flops 1 --allow-idle --top 1000 "
                                                     "--explain --json '{}'",
                                                     dir.file("example/experiment.yaml"), dir.file("ranked.json")));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(testing::read_text(dir.file("ranked.json")).find("type: micro_naive"), std::string::npos) << out;
  // Without it the scheme is unknown; a file that is no library is named.
  std::tie(code, out) = testing::pipelab("list scheme micro_naive");
  EXPECT_EQ(code, 2) << out;
  std::tie(code, out) = testing::pipelab("list scheme micro_naive --plugin " + dir.file("example/CMakeLists.txt"));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("cannot be loaded"), std::string::npos) << out;
  // A path with ':' (PIPELAB_PLUGINS' separator) reaches the processes launch starts.
  fs::create_directories(dir.file("a:b"));
  fs::copy_file(library, dir.file("a:b/libmicro_naive.so"));
  std::tie(code, out) = testing::pipelab(fmt::format("launch --nproc 2 '{}' --plugin '{}' --set 'plugins=[]' "
                                                     "--set run.output='{}' --quiet",
                                                     dir.file("example/experiment.yaml"),
                                                     dir.file("a:b/libmicro_naive.so"), dir.file("colon")));
  EXPECT_EQ(code, 0) << out;
  // A second library registering the same names: the plugin, the name and the fix.
  std::tie(code, out) = testing::pipelab(
      fmt::format("list scheme --plugin '{}' --plugin '{}'", library, dir.file("a:b/libmicro_naive.so")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("libmicro_naive.so registers scheme 'micro_naive', a name pipelab or an earlier plugin already "
                     "has. Fix: give it another name"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace pipelab::plugin_test
