#pragma once
/// A child process whose stdout and stderr go to a log file: how a sweep runs each cell
/// (`pipelab run CELL --resume --quiet`), so one run's crash or divergence never takes the
/// sweep down and every run keeps its own log.
#include <sys/types.h>

#include <string>
#include <vector>

namespace pipelab::tools {

class ChildProcess {
 public:
  /// Starts `argv` (argv[0] is a path to an executable) with this process's environment
  /// plus `env` ("NAME=value", replacing a variable of the same name), appending its output
  /// to `log_path`. The child gets SIGTERM when this process dies, however it dies, so a
  /// killed sweep leaves no orphan writing into a run folder that a rerun resumes.
  /// Throws UserError when the process cannot be created.
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& log_path);
  /// Terminates and reaps a child that is still running.
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// True once the child has ended (never blocks).
  bool poll();
  /// Blocks until the child ends; returns exit_code().
  int wait();
  /// Asks the child to end (SIGTERM).
  void terminate();
  /// The exit status, or 128 + the signal that ended it (as shells report it); -1 while running.
  int exit_code() const { return exit_code_; }

 private:
  void reap(int status);

  pid_t pid_ = -1;
  int exit_code_ = -1;
};

}  // namespace pipelab::tools
