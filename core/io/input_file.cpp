#include "core/io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/memory_size.h"

namespace pipelab {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void open_failed(const std::string& path, int error) {
  if (error == ENOENT || error == ENOTDIR) {
    std::error_code ec;
    const std::string cwd = std::filesystem::current_path(ec).string();
    struct stat link {};
    const bool dangling = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
    throw UserError(fmt::format("{}: {}. Fix: check the path (a relative path is read from {}).", path,
                                dangling ? "a symbolic link to a file that does not exist" : "file not found",
                                cwd.empty() ? "the current folder" : cwd));
  }
  if (error == ELOOP) {
    throw UserError(fmt::format("{}: a loop of symbolic links (too many levels). Fix: point the link at a real "
                                "file.",
                                path));
  }
  if (error == EACCES || error == EPERM) {
    throw UserError(fmt::format("{}: permission denied. Fix: make the file readable (chmod a+r).", path));
  }
  throw UserError(fmt::format("{}: cannot open the file ({}). Fix: check the path.", path, std::strerror(error)));
}

/// Opens `path` for reading without blocking (a FIFO opens at once) and checks it is a
/// regular file; returns the descriptor and its size.
int open_regular(const std::string& path, uint64_t& size) {
  if (path.empty()) throw UserError("an input file's path is empty. Fix: give the file's path.");
  if (path.find('\0') != std::string::npos) {
    throw UserError("an input file's path contains a NUL byte. Fix: give the file's path.");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) open_failed(path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    open_failed(path, error);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UserError(fmt::format("{}: is {}, not a regular file; pipelab reads its inputs whole{}. Fix: give the "
                                "path of a regular file{}.",
                                path, kind_of(st.st_mode),
                                S_ISFIFO(st.st_mode) ? ", so it would wait forever on a pipe" : "",
                                S_ISDIR(st.st_mode) ? " inside it" : " (copy the data into one)"));
  }
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

}  // namespace

std::string read_file(const std::string& path, uint64_t max_bytes) {
  uint64_t size = 0;
  const int fd = open_regular(path, size);
  if (size > max_bytes) {
    ::close(fd);
    throw UserError(fmt::format("{}: is {}, more than the {} pipelab reads from one input file. Fix: check that "
                                "this is the file you meant.",
                                path, format_bytes(static_cast<double>(size)), format_bytes(static_cast<double>(max_bytes))));
  }
  std::string out(static_cast<size_t>(size), '\0');
  size_t done = 0;
  // Read to the end, not to the size fstat gave: a file may grow or shrink meanwhile.
  for (;;) {
    if (done == out.size()) {
      if (out.size() >= max_bytes) break;
      out.resize(std::min<uint64_t>(max_bytes, std::max<uint64_t>(4096, out.size() * 2)));
    }
    const ssize_t n = ::read(fd, &out[done], out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      throw UserError(fmt::format("{}: cannot read the file ({}). Fix: check the file and its disk.", path,
                                  std::strerror(error)));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

void check_input_file(const std::string& path) {
  uint64_t size = 0;
  ::close(open_regular(path, size));
}

bool input_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace pipelab
