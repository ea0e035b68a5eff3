#include "core/util/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace pipelab {

std::string format_duration(double s) {
  if (s < 60) return fmt::format("{:.1f}s", s);
  const int total = static_cast<int>(s + 0.5);
  if (total < 3600) return fmt::format("{}m{:02d}s", total / 60, total % 60);
  return fmt::format("{}h{:02d}m", total / 3600, (total / 60) % 60);
}

Progress::Progress(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled), tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() {
  if (!finished_) finish(status_);
}

void Progress::update(int64_t done, const std::string& status) {
  done_ = done;
  status_ = status;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  // A terminal redraws 10 times a second; a log gets a line every 15 seconds.
  if (since >= (tty_ ? 0.1 : 15.0)) draw(false);
}

void Progress::finish(const std::string& status) {
  if (finished_) return;
  finished_ = true;
  status_ = status;
  draw(true);
}

void Progress::draw(bool final) {
  last_draw_ = std::chrono::steady_clock::now();
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(last_draw_ - start_).count();
  const double fraction = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  const double eta = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0;
  const std::string timing = final ? format_duration(elapsed)
                                   : fmt::format("{} < {}", format_duration(elapsed), format_duration(eta));
  if (tty_) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(fraction * kWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r\033[K%s [%s] %3.0f%% %ld/%ld %s %s%s", label_.c_str(), bar.c_str(), fraction * 100,
                 static_cast<long>(done_), static_cast<long>(total_), timing.c_str(), status_.c_str(),
                 final ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s %3.0f%% %ld/%ld %s %s\n", label_.c_str(), fraction * 100, static_cast<long>(done_),
                 static_cast<long>(total_), timing.c_str(), status_.c_str());
  }
  std::fflush(stderr);
}

}  // namespace pipelab
