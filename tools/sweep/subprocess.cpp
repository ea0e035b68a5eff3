#include "tools/sweep/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/util/error.h"

extern char** environ;

namespace pipelab::tools {
namespace {

/// This process's environment with `extra` added or replacing same-named variables.
std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  std::vector<std::string> out;
  const auto name_of = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    bool replaced = false;
    for (const std::string& x : extra) replaced = replaced || name_of(x) == name_of(kv);
    if (!replaced) out.push_back(kv);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                           const std::string& log_path) {
  // Everything the child needs is prepared before fork(): between fork() and exec() a
  // multi-threaded parent's child may only make async-signal-safe calls.
  std::vector<std::string> args = argv, envs = merged_environment(env);
  std::vector<char*> cargs = c_strings(args), cenv = c_strings(envs);
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) {
    throw UserError(fmt::format("{}: cannot open the run's log ({}). Fix: check that the folder is writable.", log_path,
                                std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);  // the parent died before prctl
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::execve(cargs[0], cargs.data(), cenv.data());
    const char msg[] = "pipelab sweep: cannot start the run (exec failed)\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(log);
  if (pid_ < 0) {
    throw UserError(fmt::format("cannot start a process for {} ({}). Fix: lower --jobs or free system resources.",
                                argv.front(), std::strerror(fork_errno)));
  }
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept : pid_(other.pid_), exit_code_(other.exit_code_) {
  other.pid_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && exit_code_ < 0) {
    terminate();
    wait();
  }
}

void ChildProcess::reap(int status) {
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

bool ChildProcess::poll() {
  if (exit_code_ >= 0 || pid_ <= 0) return true;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) reap(status);
  return exit_code_ >= 0;
}

int ChildProcess::wait() {
  while (exit_code_ < 0 && pid_ > 0) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, 0);
    if (r == pid_) {
      reap(status);
    } else if (r < 0 && errno != EINTR) {
      exit_code_ = 1;  // not our child any more (reaped elsewhere): nothing left to wait for
    }
  }
  return exit_code_;
}

void ChildProcess::terminate() {
  if (pid_ > 0 && exit_code_ < 0) ::kill(pid_, SIGTERM);
}

}  // namespace pipelab::tools
