#pragma once
/// The one place pipelab talks to PyTorch's c10d (process_group.cpp): a Gloo process group
/// whose ranks meet through a TCPStore served by rank 0. Everything above it (the
/// distributed executor, the replicas' all-reduce) sees only tensors, ranks and tags.
#include <ATen/Tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace pipelab::dist {

class DeviceChannel;

/// `host:port` of the rendezvous (rank 0 serves the store there).
struct Endpoint {
  std::string host = "127.0.0.1";
  int port = 29500;
  /// Parses "host:port" or "port"; anything else is a UserError naming `what`.
  static Endpoint parse(const std::string& text, const std::string& what);
  std::string str() const;
};

struct GroupOptions {
  int rank = 0;
  int world_size = 1;
  Endpoint master;
  /// How long a rank waits for a peer (rendezvous, a message, a collective) before it
  /// gives up with an error naming the peer: a dead peer never hangs the others.
  double timeout_seconds = 300;
};

/// A TCP port on 127.0.0.1 that was free a moment ago (for a local rendezvous).
int free_port();

/// True when this pipelab was built with c10d's Gloo backend (the headers of Debian's
/// libgloo-dev; the code itself is inside LibTorch).
bool available();

/// A recv() stopped by abort_receives().
class ReceiveAborted : public std::runtime_error {
 public:
  ReceiveAborted() : std::runtime_error("receive aborted") {}
};

class ProcessGroup {
 public:
  /// Joins the group: blocks until every rank has joined or the timeout passes.
  explicit ProcessGroup(const GroupOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return options_.rank; }
  int size() const { return options_.world_size; }
  const GroupOptions& options() const { return options_; }

  /// Starts sending contiguous CPU tensor `t` to `dst` under `tag`; returns at once. The
  /// tensor is kept alive until the send completes (complete_sends()).
  void send(const at::Tensor& t, int dst, int tag);
  /// Receives into `t` (its shape and dtype must match what was sent) from `src`. Throws
  /// ReceiveAborted when abort_receives() stops it.
  void recv(at::Tensor& t, int src, int tag);
  /// A receive posted ahead of its wait.
  struct Pending;
  /// Starts receiving into contiguous CPU tensor `t` from `src` under `tag` and returns at
  /// once. Gloo fills the front of `t` with what was sent, which may be shorter than `t`.
  std::shared_ptr<Pending> post_recv(const at::Tensor& t, int src, int tag);
  /// Waits for a posted receive (ReceiveAborted as recv()).
  void wait_recv(Pending& pending);
  /// Stops every recv() waiting now and every later one (a run that failed elsewhere must
  /// not wait for messages that will never come); reset_receives() allows them again.
  void abort_receives();
  void reset_receives();
  /// Waits for every send started so far.
  void complete_sends();
  /// Every rank's `t` (same shape on every rank), in rank order.
  std::vector<at::Tensor> all_gather(const at::Tensor& t);
  /// Every rank's `rows` (a 2-D CPU tensor: any number of rows, the same columns and dtype
  /// on every rank), in rank order: the row counts first, then the rows padded to the most.
  std::vector<at::Tensor> all_gather_rows(const at::Tensor& rows);
  void barrier();
  /// Every rank's `text` under `key`, in rank order (through the rendezvous store).
  std::vector<std::string> exchange(const std::string& key, const std::string& text);
  /// A c10d group of `ranks` (this rank among them, no rank twice), as Python's
  /// torch.distributed.new_group makes one: a Gloo group over this group's store under the
  /// prefix `name`, whose rank r is ranks[r]. Every member calls it with the same arguments
  /// (and the others do not), so the members meet in the store.
  std::unique_ptr<ProcessGroup> subgroup(const std::vector<int>& ranks, const std::string& name);
  /// An NCCL channel from rank `sender` to rank `receiver` (this rank is one of them) under
  /// the name `name` (dist/device_channel.h); both call it with the same arguments.
  std::unique_ptr<DeviceChannel> device_channel(int sender, int receiver, const std::string& name);

 private:
  struct Impl;
  ProcessGroup(const GroupOptions& options, std::unique_ptr<Impl> impl);
  /// The PeerError's text when the others are gone while this rank was `doing` something.
  std::string lost_contact(const std::string& doing, const std::exception& e) const;
  GroupOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipelab::dist
