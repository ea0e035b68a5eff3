#include "core/util/error_text.h"

#include <fmt/format.h>

#include <cerrno>
#include <regex>
#include <sstream>

namespace pipelab {
namespace {

/// A line of a stack trace, as LibTorch (c10::Error's backtrace) and c10d print them.
bool trace_line(const std::string& line) {
  static const std::regex frame(R"(^\s*(frame #\d+|#\d+\s|Exception raised from |\(no backtrace available\)))");
  return std::regex_search(line, frame);
}

}  // namespace

std::string without_internals(const std::string& text) {
  std::istringstream in(text);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    if (trace_line(line)) continue;
    kept += (kept.empty() ? "" : "\n") + line;
  }
  // Source locations and LibTorch's notes to its own developers.
  static const std::regex internals(
      R"((\s*\[enforce fail at [^\]]*\])|(\s*at "[^"]*":\d+,?)|(\s*please report a bug to PyTorch\.?)|)"
      R"(((/[^\s:"]*/)?[\w.-]+\.(cpp|cc|cxx|h|hpp|cu|cuh):\d+(:\d+)?:?))");
  std::string out = std::regex_replace(kept, internals, "");
  // What removing them leaves behind: a leading ": ", doubled spaces.
  out = std::regex_replace(out, std::regex(R"(^\s*:?\s*)"), "");
  out = std::regex_replace(out, std::regex(R"( {2,})"), " ");
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string filesystem_message(const std::filesystem::filesystem_error& e) {
  return filesystem_message(e.path1().empty() ? "a path" : e.path1().string(), e.code());
}

std::string filesystem_message(const std::string& path, std::error_code error) {
  const int code = error.value();
  std::string reason, fix;
  switch (code) {
    case ELOOP:
      reason = "a loop of symbolic links (too many levels)";
      fix = "point the link at a real file or folder";
      break;
    case ENOTDIR:
      reason = "a part of this path is a file, not a folder";
      fix = "give a path whose folders are folders (or remove the file in the way)";
      break;
    case ENOENT:
      reason = "no such file or folder";
      fix = "check the path (a relative path in an experiment file is read from the file's folder)";
      break;
    case EEXIST:
      reason = "something that is not a folder is already there";
      fix = "remove it, or choose another path";
      break;
    case EACCES:
    case EPERM:
    case EROFS:
      reason = "permission denied";
      fix = "choose a path this user may write and read, or change its permissions";
      break;
    case ENOSPC:
    case EDQUOT:
      reason = "no space left on the device";
      fix = "free space there, or write elsewhere; `--resume` continues an interrupted run";
      break;
    case EFBIG:
      reason = "the file would pass the largest size this process may write (a file size limit)";
      fix = "raise the limit (ulimit -f), or write elsewhere; `--resume` continues an interrupted run";
      break;
    case ENAMETOOLONG:
      reason = "the name is too long";
      fix = "use a shorter path";
      break;
    default:
      reason = error.message();
      fix = "check the path";
  }
  return fmt::format("{}: {}. Fix: {}", path, reason, fix);
}

bool filesystem_error_is_users(const std::filesystem::filesystem_error& e) {
  const int code = e.code().value();
  return code != ENOSPC && code != EDQUOT && code != EFBIG && code != EIO;
}

}  // namespace pipelab
