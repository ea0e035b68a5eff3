#pragma once
/// What an error message shows a user. Messages from LibTorch, c10d, the C++ library and
/// pipelab's own assertions can carry internal detail — source locations, assert text,
/// stack frames — that helps whoever fixes a bug and confuses whoever made a typo; the command
/// line shows it only with `--debug` (tools/cli/main.cpp). Filesystem errors become a message
/// naming the path, the reason and the fix.
#include <filesystem>
#include <string>

namespace pipelab {

/// `text` without stack-trace lines ("frame #3: ...", "Exception raised from ..."), source
/// locations ("registry.h:72", "at \"/pytorch/...cpp\":800"), LibTorch's "please report a bug"
/// and "[enforce fail at ...]" clauses.
std::string without_internals(const std::string& text);

/// A filesystem error (a loop of links, a file where a folder should be, a full disk) as
/// "<path>: <reason>. Fix: <fix>".
std::string filesystem_message(const std::filesystem::filesystem_error& e);
std::string filesystem_message(const std::string& path, std::error_code code);

/// Whether that error is the user's to fix (a path) rather than the machine's (a full disk,
/// an I/O error): exit code 2 or 1.
bool filesystem_error_is_users(const std::filesystem::filesystem_error& e);

}  // namespace pipelab
