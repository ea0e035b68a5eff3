// What an error shows a user (core/util/error_text.h): internal detail stripped from
// LibTorch's, c10d's and pipelab's own messages, and filesystem errors as path, reason, fix.
#include <gtest/gtest.h>

#include <cerrno>

#include "core/util/error_text.h"

namespace pipelab::error_text_test {
namespace {

TEST(ErrorText, InternalDetailIsLeftOut) {
  // LibTorch's internal assert (what attention gave for heads that do not divide the width).
  EXPECT_EQ(without_internals("embed_dim == embed_dim_to_check INTERNAL ASSERT FAILED at "
                              "\"/pytorch/torch/csrc/api/include/torch/nn/functional/activation.h\":800, please "
                              "report a bug to PyTorch. was expecting embedding dimension of 6, but got 4"),
            "embed_dim == embed_dim_to_check INTERNAL ASSERT FAILED was expecting embedding dimension of 6, but got 4");
  // c10d's backtrace before the reason.
  EXPECT_EQ(without_internals("could not join the run\nException raised from connect at /x/TCPStore.cpp:12 (most "
                              "recent call first):\nframe #0: c10::Error::Error() + 0x9\nframe #1: f + 0x2"),
            "could not join the run");
  EXPECT_EQ(without_internals("[enforce fail at alloc_cpu.cpp:127] data. DefaultCPUAllocator: can't allocate memory"),
            "data. DefaultCPUAllocator: can't allocate memory");
  EXPECT_EQ(without_internals("/work/core/config/registry.h:72: internal error: !entries_.count(name) (x)"),
            "internal error: !entries_.count(name) (x)");
  // A long message (a 100,000-digit value quoted back) is handled, not a stack overflow.
  const std::string digits(100000, '1');
  EXPECT_EQ(without_internals("e.yaml:2:5: optimizer.lr: '" + digits + "' is not a number"),
            "e.yaml:2:5: optimizer.lr: '" + digits + "' is not a number");
  // A user's own files and numbers stay.
  EXPECT_EQ(without_internals("e.yaml:3:5: run.epochs: must be a number > 0, got 0"),
            "e.yaml:3:5: run.epochs: must be a number > 0, got 0");
}

TEST(ErrorText, FilesystemErrorsNameThePathAndTheFix) {
  const auto message = [](int code) {
    return filesystem_message(std::filesystem::filesystem_error("x", "out/codec_cache", std::error_code(code, std::generic_category())));
  };
  EXPECT_EQ(message(ELOOP), "out/codec_cache: a loop of symbolic links (too many levels). Fix: point the link at a real "
                            "file or folder");
  EXPECT_EQ(message(ENOTDIR).rfind("out/codec_cache: a part of this path is a file, not a folder. Fix:", 0), 0u);
  EXPECT_TRUE(filesystem_error_is_users(std::filesystem::filesystem_error("x", std::error_code(ENOTDIR, std::generic_category()))));
  EXPECT_FALSE(filesystem_error_is_users(std::filesystem::filesystem_error("x", std::error_code(ENOSPC, std::generic_category()))));
}

}  // namespace
}  // namespace pipelab::error_text_test
