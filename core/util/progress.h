#pragma once
/// A progress bar on a terminal; plain periodic lines when stderr is not a terminal (CI
/// logs, files), so long work is never silent and never floods a log.
#include <chrono>
#include <string>

namespace pipelab {

class Progress {
 public:
  /// `enabled` false prints nothing.
  Progress(std::string label, int64_t total, bool enabled = true);
  ~Progress();
  /// Sets the number of finished units and a short status ("loss 0.43").
  void update(int64_t done, const std::string& status = "");
  /// Ends the bar (prints the final state once).
  void finish(const std::string& status = "");

 private:
  void draw(bool final);

  std::string label_, status_;
  int64_t total_, done_ = 0;
  bool enabled_, tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

/// "1m05s", "3.2s".
std::string format_duration(double seconds);

}  // namespace pipelab
