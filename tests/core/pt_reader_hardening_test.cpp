// Malformed and hostile .pt files: each class of input that crashed, hung or gave an
// unclear error before (issue: hardening) now gives one UserError that names the file and
// says it is not a state dict pipelab can read. The pickles are written by hand, byte by
// byte, inside a real torch.save zip container.
#include <gtest/gtest.h>

#include <caffe2/serialize/inline_container.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "core/io/pt_file.h"
#include "tests/support/helpers.h"

namespace pipelab::pt_reader_hardening_test {
namespace {

using namespace std::string_literals;

/// A torch.save-style archive around `pickle`, with optional storage records.
std::string archive(const std::string& pickle, const std::vector<std::pair<std::string, std::string>>& storages = {}) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return n;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeRecord("byteorder", "little", 6);
  for (const auto& [key, bytes] : storages) writer.writeRecord("data/" + key, bytes.data(), bytes.size());
  writer.writeEndOfFile();
  return out;
}

/// A BINUNICODE string (opcode X, 4-byte little-endian length).
std::string str(const std::string& s) {
  return "X" + std::string(1, static_cast<char>(s.size())) + std::string(3, '\0') + s;
}

/// The pickle of torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, {}) of
/// a FloatStorage `key` declared with `numel` elements (1-D size and stride).
std::string tensor_pickle(int numel, int offset, int size, int stride, const std::string& type = "FloatStorage") {
  const auto k = [](int v) { return "K" + std::string(1, static_cast<char>(v)); };
  return std::string("\x80\x02") + "ctorch._utils\n_rebuild_tensor_v2\n(" + "(" + str("storage") + "ctorch\n" + type +
         "\n" + str("0") + str("cpu") + k(numel) + "tQ" + k(offset) + "(" + k(size) + "t(" + k(stride) + "t" + "\x89" +
         "}" + "tR.";
}

/// The error of reading `bytes` ("" if it reads).
std::string error_of(const std::string& bytes) {
  return testing::user_error([&] { decode_pt(bytes, "bad.pt"); });
}

void expect_clear(const std::string& bytes, const std::string& detail) {
  const std::string e = error_of(bytes);
  EXPECT_NE(e.find("bad.pt: not a state dict pipelab can read"), std::string::npos) << e;
  EXPECT_NE(e.find(detail), std::string::npos) << e;
  EXPECT_NE(e.find("Fix:"), std::string::npos) << e;
}

TEST(PtReaderHardening, AWellFormedTensorReads) {
  const std::string four(16, '\0');
  const c10::IValue v = decode_pt(archive(tensor_pickle(4, 0, 4, 1), {{"0", four}}), "good.pt");
  ASSERT_TRUE(v.isTensor());
  EXPECT_EQ(v.toTensor().numel(), 4);
}

TEST(PtReaderHardening, StackUnderflowOnEveryOpcodeThatPops) {
  for (const char* op : {"\x85", "\x86", "\x87", "2", "q\x00", "r\x00\x00\x00\x00", "\x94", "a", "s", "R", "\x81",
                         "b", "Q", "\x93", "0", "."}) {
    expect_clear(archive(std::string("\x80\x02") + std::string(op, op[0] == 'q' ? 2 : op[0] == 'r' ? 5 : 1) + "."),
                 "");
  }
  // No opcode reaches below a MARK (Python's pickle gives "unpickling stack underflow").
  expect_clear(archive("\x80\x02K\x01(\x85."), "empty stack");
  expect_clear(archive("\x80\x02K\x01(2."), "empty stack");
}

TEST(PtReaderHardening, ContainersThatContainThemselves) {
  expect_clear(archive("\x80\x02]q\x00h\x00" "a."s), "a list contains itself");
  expect_clear(archive("\x80\x02}q\x00K\x01h\x00s."s), "a dict contains itself");
}

TEST(PtReaderHardening, DeepNestingIsRefusedWithoutRecursionTrouble) {
  for (const int depth : {300, 200000}) {
    const std::string pickle = "\x80\x02" + std::string(static_cast<size_t>(depth), ']') +
                               std::string(static_cast<size_t>(depth - 1), 'a') + ".";
    expect_clear(archive(pickle), "nest deeper than");
  }
}

TEST(PtReaderHardening, RepeatedReferencesAreNotExpanded) {
  // "Billion laughs": each level is a list of ten references to the level below, 30 levels:
  // 10^30 leaves if expanded. Shared objects stay shared, so it reads at once.
  std::string p = "\x80\x02K\x00q\x00"s;
  for (int level = 0; level < 30; ++level) {
    p += "(";
    for (int k = 0; k < 10; ++k) p += "h" + std::string(1, static_cast<char>(level % 2));
    p += "lq" + std::string(1, static_cast<char>((level + 1) % 2));
  }
  p += ".";
  const auto start = std::chrono::steady_clock::now();
  const c10::IValue v = decode_pt(archive(p), "laughs.pt");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_TRUE(v.isList());
  // ... and what needs a state dict says so.
  EXPECT_NE(testing::user_error([&] { to_tensor_dict(v, "laughs.pt"); }).find("expected a dict"), std::string::npos);
}

TEST(PtReaderHardening, StoragesWhoseSizesLie) {
  const std::string four(16, '\0');
  expect_clear(archive(tensor_pickle(100, 0, 4, 1), {{"0", four}}), "storage 0 has 16 bytes");
  expect_clear(archive(tensor_pickle(4, 0, 10, 1), {{"0", four}}), "reaches element 9 of a storage of 4");
  expect_clear(archive(tensor_pickle(4, 3, 2, 1), {{"0", four}}), "reaches element 4");
  expect_clear(archive(tensor_pickle(4, 0, 4, 1)), "storage record data/0 is missing");
  expect_clear(archive(tensor_pickle(4, 0, 4, 1, "FooStorage"), {{"0", four}}),
               "unsupported storage type torch.FooStorage");
  // A size near 2^62 with a stride: overflow, not a wrapped check.
  std::string huge = tensor_pickle(4, 0, 4, 1);
  const std::string size = "(K\x04t";
  huge.replace(huge.find(size), size.size(), "(\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x3ft");
  expect_clear(archive(huge, {{"0", four}}), "overflows");
}

TEST(PtReaderHardening, OddDictKeysAndForeignObjects) {
  expect_clear(archive("\x80\x02}](K\x01ls."), "a dict key is a list");
  expect_clear(archive("\x80\x02}}K\x01s."), "a dict key is a dict");
  expect_clear(archive("\x80\x02" "cposix\nsystem\n(" + str("echo hi") + "tR."), "an object of type posix.system");
  expect_clear(archive("\x80\x02" "cbuiltins\neval\n(" + str("1") + "tR."), "an object of type builtins.eval");
  // A length that runs past the end (and would overflow an unchecked sum).
  expect_clear(archive(std::string("\x80\x02\x8d") + std::string(8, '\xff') + "."), "ends early");
  expect_clear(archive("\x80\x02\xff."), "unsupported pickle opcode 0xff");
}

TEST(PtReaderHardening, EveryFileOfTheHostileProbe) {
  // The files tools/probe/hostile_pt.py writes (Python's zipfile only, no torch needed).
  testing::TempDir dir;
  const auto [code, out] = testing::shell(fmt::format("python3 {}/tools/probe/hostile_pt.py {}", PIPELAB_SOURCE_DIR, dir.path()));
  if (code != 0) GTEST_SKIP() << "python3 not available: " << out;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string path = entry.path().string();
    ++files;
    const std::string e = testing::user_error([&] { load_pt(path); });
    if (entry.path().filename() == "billion-laughs.pt") {
      EXPECT_EQ(e, "") << "shared objects are kept shared, so this one reads";
      continue;
    }
    EXPECT_NE(e.find(path + ": not a state dict pipelab can read"), std::string::npos) << path << ": " << e;
  }
  EXPECT_EQ(files, 40);
}

TEST(PtReaderHardening, NotAnArchiveOrAFolder) {
  expect_clear("PK\x03\x04 garbage", "not a zip archive");
  testing::TempDir dir;
  EXPECT_NE(testing::user_error([&] { load_pt(dir.path()); }).find("is a folder"), std::string::npos);
}

}  // namespace
}  // namespace pipelab::pt_reader_hardening_test
