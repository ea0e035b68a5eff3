#pragma once
/// Messages from other processes, received ahead of the actions that use them. Gloo moves a
/// message only once its receiver has posted the receive (a rendezvous), so a receive posted
/// when the RECV action runs puts a round trip per message part on the device's critical path.
/// As torch.distributed.pipelining posts its irecvs early, one thread per local device walks
/// that device's RECV actions from other processes in order, keeps the receives of the next
/// ones posted (up to 32 messages or 64 MiB ahead), takes each as it arrives and leaves it
/// in the device's mailbox, where the RECV action takes it. A tensor that came
/// over a device channel (NCCL) is ready on the receiver's stream; the parcel carries the
/// event the consuming stage's stream waits for.
#include <c10/core/Device.h>

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/dist/wire.h"
#include "core/exec/mailboxes.h"

namespace pipelab {

/// Where a remote message comes from and where it lands.
struct RemoteLinks {
  std::function<int(int)> rank_of;  ///< stage -> the rank that runs it
  /// The device channel of the edge from stage `from` to stage `to`, or null (Gloo).
  std::function<dist::DeviceChannel*(int from, int to)> channel;
  std::function<c10::Device(int)> device;  ///< stage -> its device
  dist::WireSizes* sizes = nullptr;        ///< what the edges' buffers hold (dist/wire.h)
};

class RemoteReceives {
 public:
  /// Starts receiving, for every device d with local(d), the messages its RECV actions in `s`
  /// take from stages whose rank (`links.rank_of`) is not this one.
  RemoteReceives(const Schedule& s, dist::ProcessGroup& group, Mailboxes& mailboxes,
                 const std::function<bool(int)>& local, RemoteLinks links);
  /// Stops (as stop()) unless finish() ran, and joins.
  ~RemoteReceives();
  RemoteReceives(const RemoteReceives&) = delete;
  RemoteReceives& operator=(const RemoteReceives&) = delete;

  /// Stops waiting for messages (a run that failed here will never get them).
  void stop();
  /// Joins the threads; rethrows the first error a receiver met (a lost peer), if any.
  void finish();

 private:
  void receive_all(int device, const std::vector<Action>& receives);

  dist::ProcessGroup& group_;
  Mailboxes& mailboxes_;
  RemoteLinks links_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::exception_ptr error_;
  bool stopped_ = false;
};

}  // namespace pipelab
