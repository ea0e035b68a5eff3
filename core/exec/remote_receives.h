#pragma once
/// Messages from other processes, received ahead of the actions that use them. Gloo moves a
/// message only once its receiver has posted the receive (a rendezvous), so a receive posted
/// when the RECV action runs puts a round trip per message part on the device's critical path.
/// As torch.distributed.pipelining posts its irecvs early, one thread per local device walks
/// that device's RECV actions from other processes in order, receives each as soon as it can
/// and leaves it in the device's mailbox, where the RECV action takes it.
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/dist/process_group.h"
#include "core/exec/mailboxes.h"

namespace pipelab {

class RemoteReceives {
 public:
  /// Starts receiving, for every device d with local(d), the messages its RECV actions in `s`
  /// take from stages whose rank (`rank_of`) is not this one.
  RemoteReceives(const Schedule& s, dist::ProcessGroup& group, Mailboxes& mailboxes,
                 const std::function<bool(int)>& local, const std::function<int(int)>& rank_of);
  /// Stops (as stop()) unless finish() ran, and joins.
  ~RemoteReceives();
  RemoteReceives(const RemoteReceives&) = delete;
  RemoteReceives& operator=(const RemoteReceives&) = delete;

  /// Stops waiting for messages (a run that failed here will never get them).
  void stop();
  /// Joins the threads; rethrows the first error a receiver met (a lost peer), if any.
  void finish();

 private:
  void receive_all(const std::vector<Action>& receives);

  dist::ProcessGroup& group_;
  Mailboxes& mailboxes_;
  std::function<int(int)> rank_of_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::exception_ptr error_;
  bool stopped_ = false;
};

}  // namespace pipelab
