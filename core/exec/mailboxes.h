#pragma once
/// The threaded executor's transport: one mailbox per receiving stage, keyed by the sending
/// action (kind, micro-batch), with blocking receive; a barrier for ALLREDUCE actions;
/// and cancellation, which wakes every waiting device with Cancelled.
#include <condition_variable>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/exec/transport.h"

namespace pipelab {

class Mailboxes : public Transport {
 public:
  /// Mailboxes for `stages` receiving stages. A receiver polls for `spin_seconds` before it
  /// sleeps.
  explicit Mailboxes(int stages, double spin_seconds = 0);
  void send(int from, int to, char kind, int mb, Parcel p) override;
  Parcel receive(int to, int from, char kind, int mb) override;
  void collective_barrier(int group, int members) override;

  /// Wakes every waiting stage with Cancelled, now and in every later wait.
  void cancel();
  bool cancelled() const;
  /// Messages sent and not received (0 after a complete run).
  size_t pending() const;
  /// The most messages any one mailbox held at once: how far ahead senders ran. The
  /// schedule bounds it (a 1F1B stage r holds at most D - r forward activations).
  size_t high_water() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::map<std::pair<char, int>, Parcel>> boxes_;  ///< per receiver: (kind, mb) -> message
  size_t high_water_ = 0;
  bool cancelled_ = false;
  // Per collective group: stages arrived in its current round, and the round number (the
  // members of a group meet round after round, each blocked until its round completes).
  struct Round {
    int arrived = 0;
    int64_t number = 0;
  };
  std::map<int, Round> rounds_;
  double spin_seconds_ = 0;
};

}  // namespace pipelab
