#pragma once
/// Messages over a process group. A message is one Gloo send of a byte buffer: a fixed-size
/// int64 header (which tensors, their dtypes and shapes, the policy tag) followed by the
/// tensors' bytes, under a tag of its own so that the receiver can take messages in its own
/// order. Gloo moves a message once its receiver has posted the receive, and fills the front
/// of a larger buffer, so the receiver posts its receives ahead (exec/remote_receives.h) into
/// buffers as large as the largest message of that edge so far (WireSizes). A message larger
/// than that (the first of each edge) sends its header alone and then one send per tensor,
/// which the receiver posts once it has read the header.
///
/// Between two ranks of one host with a shared-memory link (dist/shm_link.h) the same bytes
/// go through the link's ring instead, with nothing posted ahead; a message the ring has no
/// room for goes over Gloo whole, and the link tells the receiver so.
///
/// Tensors travel through host memory (Gloo or shared memory) and the receiver moves them
/// to its device, unless the edge has a device channel (NCCL, dist/device_channel.h): then
/// its CUDA tensors go GPU to GPU, in the schedule's order, and only the header goes the
/// host's way.
#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/processes/device_channel.h"
#include "core/processes/process_group.h"
#include "core/processes/shm_link.h"
#include "core/comm/message.h"

namespace pipelab::dist {

/// The tag of part `part` (0: the message, 1..: tensors sent apart) of the message with
/// payload `kind` ('F', 'B', 'H') of micro-batch `mb` (below 2^19) for stage `to`. Unique per
/// sender-receiver pair within a schedule run: two stages of one process could share tags only
/// if they were a multiple of 16 apart and heard from the same process (an interleaved
/// placement over more than 16 processes).
int message_tag(char kind, int mb, int to, int part);

/// The largest message of each edge (sending stage, receiving stage, payload) in the runs
/// before this one. Both ends keep their own and see the same messages, so they agree on
/// what fits a posted buffer without asking each other.
class WireSizes {
 public:
  /// Bytes a receiver posts for the edge (at least a header).
  int64_t capacity(int from, int to, char kind) const;
  /// A message of `bytes` (whole, as if it had fitted) went over the edge in this run.
  void saw(int from, int to, char kind, int64_t bytes);
  /// The run is over: what it saw counts from the next run on.
  void end_run();

 private:
  using Edge = std::tuple<int, int, char>;
  mutable std::mutex mutex_;
  std::map<Edge, int64_t> capacity_, seen_;
};

/// Where a message is going or coming from, and how.
struct Route {
  int from = 0;  ///< sending stage
  int to = 0;    ///< receiving stage
  char kind = 'F';
  int mb = 0;
  int peer = 0;  ///< the other process's rank
  DeviceChannel* channel = nullptr;  ///< the edge's device channel, or null
  ShmLink* link = nullptr;           ///< the shared-memory link to or from `peer`, or null (Gloo)
};

void send_message(ProcessGroup& group, const Message& m, const Route& route, WireSizes& sizes);

/// A receive posted ahead: post_message() returns at once; finish_message() waits and
/// returns the message, whose device-channel tensors land on `device` (the receiving
/// stage's), ready on the current stream.
struct PostedMessage;
std::shared_ptr<PostedMessage> post_message(ProcessGroup& group, const Route& route, const WireSizes& sizes);
Message finish_message(ProcessGroup& group, PostedMessage& posted, WireSizes& sizes,
                       const c10::Device& device = c10::Device(c10::kCPU));
/// Bytes the posted receive holds (for limiting how much is posted at once).
int64_t posted_bytes(const PostedMessage& posted);

}  // namespace pipelab::dist
