// Hostile input files (tools/probe/hostile_surfaces.py, "yaml" and "fifo"): every input is
// checked to be a regular file before it is read, and every YAML text is bounded (aliases,
// depth, NUL bytes). Each case would hang or crash pipelab without the check.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include <fmt/ranges.h>

#include "core/config/config_node.h"
#include "core/config/yaml_file.h"
#include "core/io/input_file.h"
#include "core/io/pt_file.h"
#include "tests/support/helpers.h"

namespace pipelab::input_files_test {
namespace {

std::string config_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(InputFiles, AFifoIsRefusedAtOnceNotWaitedOn) {
  testing::TempDir dir;
  const std::string fifo = dir.file("exp.yaml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const auto start = std::chrono::steady_clock::now();
  for (const auto& read : std::vector<std::function<void()>>{[&] { read_file(fifo); }, [&] { check_input_file(fifo); },
                                                             [&] { load_yaml_file(fifo); }, [&] { load_pt(fifo); }}) {
    const std::string e = testing::user_error(read);
    EXPECT_NE(e.find(fifo + ": is a FIFO (named pipe), not a regular file"), std::string::npos) << e;
    EXPECT_NE(e.find("Fix:"), std::string::npos) << e;
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5);
}

TEST(InputFiles, FoldersDevicesLoopsAndMissingFilesNameThePathAndTheFix) {
  testing::TempDir dir;
  const std::string loop = dir.file("loop.yaml"), dangling = dir.file("dangling.yaml");
  std::filesystem::create_symlink(loop, loop);
  std::filesystem::create_symlink(dir.file("nowhere.yaml"), dangling);
  EXPECT_NE(testing::user_error([&] { read_file(dir.path()); }).find("is a folder"), std::string::npos);
  EXPECT_NE(testing::user_error([&] { read_file("/dev/zero"); }).find("a character device"), std::string::npos);
  EXPECT_NE(testing::user_error([&] { read_file(loop); }).find("a loop of symbolic links"), std::string::npos);
  EXPECT_NE(testing::user_error([&] { read_file(dangling); }).find("a symbolic link to a file that does not exist"),
            std::string::npos);
  EXPECT_NE(testing::user_error([&] { read_file(dir.file("none")); }).find("file not found"), std::string::npos);
  testing::write_text(dir.file("big"), std::string(2000, 'x'));
  EXPECT_NE(testing::user_error([&] { read_file(dir.file("big"), 1000); }).find("more than"), std::string::npos);
  EXPECT_EQ(read_file(dir.file("big")).size(), 2000u);
}

TEST(YamlFile, SelfReferencingAliasesAreRefusedWithTheirLine) {
  // yaml-cpp builds `&a [*a]` as a node that contains itself; walking it never ended.
  for (const char* text : {"x: 1\na: &a [*a]\n", "a: &a {b: *a}\n", "a: &a [[[[*a]]]]\n"}) {
    const std::string e = config_error([&] { parse_yaml(text, "f.yaml"); });
    EXPECT_NE(e.find("f.yaml:"), std::string::npos) << e;
    EXPECT_NE(e.find("refers to its own anchor &a"), std::string::npos) << e;
  }
}

TEST(YamlFile, AliasBombsAndDeepNestingAreBounded) {
  std::string bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    bomb += fmt::format("l{0}: &l{0} [{1}]\n", i, fmt::join(std::vector<std::string>(10, fmt::format("*l{}", i - 1)), ", "));
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string e = config_error([&] { parse_yaml(bomb, "bomb.yaml"); });
  EXPECT_NE(e.find("bomb.yaml:6:"), std::string::npos) << e;  // l5 holds 1,111,111 values
  EXPECT_NE(e.find("alias bomb"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5);
  const std::string deep = "a: " + std::string(300, '[') + std::string(300, ']') + "\n";
  EXPECT_NE(config_error([&] { parse_yaml(deep, "d.yaml"); }).find("more than 200 levels deep"), std::string::npos);
  // Aliases used as intended still work.
  const YAML::Node ok = parse_yaml("base: &b {lr: 0.1}\nx: *b\ny: [*b, *b]\n", "ok.yaml");
  EXPECT_EQ(ok["y"][1]["lr"].as<double>(), 0.1);
}

TEST(YamlFile, NulBytesAndBadSetValuesNameThePlace) {
  const std::string e = config_error([&] { parse_yaml(std::string("a: 1\nb: 2\0x\n", 13), "n.yaml"); });
  EXPECT_NE(e.find("n.yaml:2:5: a NUL byte"), std::string::npos) << e;
  YAML::Node root = parse_yaml("run: {epochs: 1}\n", "e.yaml");
  ConfigSource source("e.yaml");
  const std::string set = config_error([&] { apply_overrides(root, {"run.epochs=&a [*a]"}, source); });
  EXPECT_NE(set.find("--set run.epochs=&a [*a]"), std::string::npos) << set;
}

}  // namespace
}  // namespace pipelab::input_files_test
