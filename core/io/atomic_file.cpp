#include "core/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/util/error.h"

namespace pipelab {
namespace {

[[noreturn]] void io_error(const std::string& what, const std::string& path, int error = errno) {
  throw WriteError(fmt::format("{}: cannot {} ({}). Fix: free disk space or check that the folder exists and is "
                               "writable.",
                               path, what, std::strerror(error)));
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& data) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error("create a temporary file", tmp);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      io_error("write", tmp, error);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL) {
    ::close(fd);
    ::unlink(tmp.c_str());
    io_error("write", tmp);
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    io_error("write", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;  // before unlink() can change it
    ::unlink(tmp.c_str());
    io_error("replace the file with its new version", path, error);
  }
}

void append_line(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  if (!out) io_error("open for appending", path);
  out << line << '\n';
  out.flush();
  check_written(out, path);
}

void check_written(const std::ostream& stream, const std::string& path) {
  if (!stream) io_error("write", path);
}

void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at + 5 >= name.size()) continue;
    if (name.find_first_not_of("0123456789", at + 5) != std::string::npos) continue;
    std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace pipelab
