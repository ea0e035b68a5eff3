#pragma once
/// Messages from other processes, received ahead of the actions that take them. A rank on the
/// same host with a shared-memory link (exec/host_links.h) needs nothing posted: its messages
/// wait in the link's ring. Over Gloo, which moves a
/// message only once its receiver has posted the receive (a rendezvous), so a receive posted
/// when the RECV action runs puts a round trip per message on the device's critical path.
/// As torch.distributed.pipelining posts its irecvs early, each local device keeps the
/// receives of its next RECV actions from other processes posted (up to 32 messages or
/// 64 MiB ahead, dist/wire.h), and its own thread waits for each when its RECV action runs:
/// Gloo's thread wakes the device's thread directly, with no thread in between.
/// A tensor that came over a device channel (NCCL) is ready on the device's stream.
#include <c10/core/Device.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "core/processes/wire.h"
#include "core/exec/host_links.h"
#include "core/exec/transport.h"
#include "core/schedule/schedule.h"

namespace pipelab {

/// Where a remote message comes from and where it lands.
struct RemoteLinks {
  std::function<int(int)> rank_of;  ///< stage -> the rank that runs it
  /// The device channel of the edge from stage `from` to stage `to`, or null (Gloo).
  std::function<dist::DeviceChannel*(int from, int to)> channel;
  std::function<c10::Device(int)> device;  ///< stage -> its device
  dist::WireSizes* sizes = nullptr;        ///< what the edges' buffers hold (dist/wire.h)
  HostLinks* host = nullptr;               ///< the shared-memory links from other ranks, if any
};

class RemoteReceives {
 public:
  /// Posts, for every device d with local(d), the first receives of its RECV actions in `s`
  /// from stages whose rank (`links.rank_of`) is not this one.
  RemoteReceives(const Schedule& s, dist::ProcessGroup& group, const std::function<bool(int)>& local,
                 RemoteLinks links);
  ~RemoteReceives();
  RemoteReceives(const RemoteReceives&) = delete;
  RemoteReceives& operator=(const RemoteReceives&) = delete;

  /// Whether the message (from, to, kind, mb) comes from another process.
  bool remote(int from) const;
  /// On device `device`'s thread: its next remote message, which is (from, to, kind, mb) (the
  /// device runs its RECV actions in order). Throws Cancelled once stop() ran, and a
  /// PeerError naming the peer when it is lost.
  Parcel take(int device, int to, int from, char kind, int mb);
  /// Stops every wait (a run that failed elsewhere will never get its messages).
  void stop();

 private:
  struct Inbox {
    std::vector<Action> receives;  ///< the device's RECV actions from other processes, in order
    size_t next = 0, posted = 0;
    int64_t bytes = 0;
    std::deque<std::shared_ptr<dist::PostedMessage>> ahead;
  };
  dist::Route route(const Action& a) const;
  void post_ahead(Inbox& inbox);

  dist::ProcessGroup& group_;
  RemoteLinks links_;
  std::vector<Inbox> inboxes_;  ///< per device
  std::atomic<bool> stopped_{false};
};

}  // namespace pipelab
