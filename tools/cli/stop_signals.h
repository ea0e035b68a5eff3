#pragma once
/// Ctrl-C or SIGTERM asks a long command (sweep, launch) to stop cleanly: while a
/// StopOnSignals is alive those signals only set a flag the command polls
/// (stop_requested()); the previous handlers come back when it ends.
#include <signal.h>

namespace pipelab::cli {

namespace detail {
inline volatile sig_atomic_t g_stop = 0;
extern "C" inline void request_stop(int) { g_stop = 1; }
}  // namespace detail

/// True once SIGINT or SIGTERM arrived under a StopOnSignals.
inline bool stop_requested() { return detail::g_stop != 0; }

class StopOnSignals {
 public:
  StopOnSignals() {
    struct sigaction sa {};
    sa.sa_handler = detail::request_stop;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopOnSignals() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

}  // namespace pipelab::cli
