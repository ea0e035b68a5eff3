#include "core/util/error_text.h"

#include <fmt/format.h>

#include <cerrno>
#include <cctype>
#include <sstream>

namespace pipelab {
namespace {

// Written by hand rather than with std::regex: libstdc++'s regex recurses per character and
// overflows the stack on a long message (a 100,000-digit value quoted back), and these few
// shapes need no engine. Tested in tests/core/error_text_test.cpp, long messages included.

/// A line of a stack trace, as LibTorch (c10::Error's backtrace) and c10d print them.
bool trace_line(const std::string& line) {
  const size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos) return false;
  const std::string rest = line.substr(i);
  if (rest.rfind("frame #", 0) == 0 || rest.rfind("Exception raised from ", 0) == 0 ||
      rest.rfind("(no backtrace available)", 0) == 0) {
    return true;
  }
  return rest.size() > 2 && rest[0] == '#' && std::isdigit(static_cast<unsigned char>(rest[1]));
}

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

/// Erases every `from`...`to` span (both included) that starts with `from`.
void erase_spans(std::string& s, const std::string& from, char to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p)) {
    const size_t q = s.find(to, p + from.size());
    if (q == std::string::npos) return;
    s.erase(p, q + 1 - p);
  }
}

/// Erases ` at "<path>":<line>` and a comma after it (LibTorch's assert location).
void erase_quoted_locations(std::string& s) {
  for (size_t p = s.find(" at \""); p != std::string::npos; p = s.find(" at \"", p)) {
    const size_t close = s.find('"', p + 5);
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':' || close + 2 >= s.size() ||
        !is_digit(s[close + 2])) {
      p += 5;
      continue;
    }
    size_t end = close + 2;
    while (end < s.size() && is_digit(s[end])) ++end;
    if (end < s.size() && s[end] == ',') ++end;
    s.erase(p, end - p);
  }
}

/// Erases source locations, `[dir/]name.cpp:123[:45][:]`, for C, C++ and CUDA sources.
void erase_source_locations(std::string& s) {
  static const char* const kExtensions[] = {".cpp:", ".cc:", ".cxx:", ".hpp:", ".h:", ".cu:", ".cuh:"};
  for (const char* ext : kExtensions) {
    const std::string e(ext);
    for (size_t p = s.find(e); p != std::string::npos; p = s.find(e, p)) {
      size_t end = p + e.size();
      if (end >= s.size() || !is_digit(s[end])) {
        p = end;
        continue;
      }
      while (end < s.size() && is_digit(s[end])) ++end;
      if (end + 1 < s.size() && s[end] == ':' && is_digit(s[end + 1])) {
        ++end;
        while (end < s.size() && is_digit(s[end])) ++end;
      }
      if (end < s.size() && s[end] == ':') ++end;
      size_t begin = p;
      while (begin > 0 && !std::isspace(static_cast<unsigned char>(s[begin - 1])) && s[begin - 1] != '"' &&
             s[begin - 1] != '(' && s[begin - 1] != '[') {
        --begin;
      }
      s.erase(begin, end - begin);
      p = begin;
    }
  }
}

}  // namespace

std::string without_internals(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (trace_line(line)) continue;
    out += (out.empty() ? "" : "\n") + line;
  }
  erase_spans(out, "[enforce fail at ", ']');
  erase_quoted_locations(out);
  for (const std::string note : {" please report a bug to PyTorch.", " please report a bug to PyTorch"}) {
    for (size_t p = out.find(note); p != std::string::npos; p = out.find(note, p)) out.erase(p, note.size());
  }
  erase_source_locations(out);
  // What removing them leaves behind: leading blanks and ": ", doubled spaces, trailing blanks.
  const size_t first = out.find_first_not_of(" \t:");
  out.erase(0, first == std::string::npos ? out.size() : first);
  for (size_t p = out.find("  "); p != std::string::npos; p = out.find("  ", p)) out.erase(p, 1);
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
