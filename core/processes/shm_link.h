#pragma once
/// Messages from one rank to another on the same host through a POSIX shared-memory segment
/// (the distributed executor's host path, `run.executor.backend`; exec/host_links.h decides
/// which rank pairs get one).
///
/// Why it is written here: Gloo, the engine c10d gives CPU tensors, has no shared-memory
/// transport, so between two processes of one machine every message crosses TCP on the
/// loopback, wakes Gloo's own thread in the receiver, and then the receiving stage's thread:
/// about 0.2 ms a message on this project's 2-core machine, on the critical path of every
/// pipeline (NCCL does the same for GPUs with its own shared-memory transport). Boost's
/// interprocess message_queue has fixed-size slots and a process-shared mutex that a killed
/// process leaves locked; a single-producer single-consumer ring needs no lock shared
/// between the processes, so a peer that dies cannot wedge the other.
///
/// The segment holds a ring of markers (tag, where, size) and a ring of bytes. The sender
/// writes a message into the byte ring and publishes its marker; the receiver reads markers
/// in order, copies each message out (releasing its bytes at once) and keeps those another
/// thread will take. A message that does not fit in the byte ring's free space goes over
/// Gloo instead and its marker says so: the sender never waits for the receiver's bytes.
/// Waits spin briefly, then sleep on a futex in the segment; every sleep checks that the peer
/// still runs (its pid, and a flag it sets when it closes its end) and gives up after the
/// group's timeout, naming the peer.
#include <ATen/Tensor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace pipelab::dist {

struct ShmOptions {
  int64_t ring_bytes = int64_t{64} << 20;  ///< the byte ring (committed when the segment is made)
  int markers = 4096;                       ///< messages in flight at most (the sender waits beyond)
  double spin_us = 50;                      ///< how long a wait polls before it sleeps
  double timeout_seconds = 300;             ///< how long a wait lasts before it names the peer
  int self_rank = 0;
  int peer_rank = 0;
};

class ShmLink {
 public:
  /// The receiver's end: makes segment `name` (fails if it exists) and commits its memory.
  /// Null with `why` set when the machine cannot give it (no /dev/shm, too small a one).
  static std::unique_ptr<ShmLink> create(const std::string& name, const ShmOptions& options, std::string& why);
  /// The sender's end of the segment the receiver made, checked by its `nonce`.
  static std::unique_ptr<ShmLink> open(const std::string& name, const ShmOptions& options, uint64_t nonce,
                                       std::string& why);
  ~ShmLink();
  ShmLink(const ShmLink&) = delete;
  ShmLink& operator=(const ShmLink&) = delete;

  /// The number the receiver drew for the segment (for open()).
  uint64_t nonce() const;
  /// Removes the segment's name (both ends keep their mapping); the receiver calls it once
  /// both ends are open, so that nothing is left in /dev/shm however the processes end.
  void unlink();

  /// Sender: writes a message of `bytes` bytes under `tag` with `write` (given its place in
  /// the ring) and returns true, or returns false at once when the ring has no room for it
  /// now; then the caller sends it some other way and calls sent_elsewhere().
  bool send(int64_t tag, int64_t bytes, const std::function<void(uint8_t*)>& write);
  void sent_elsewhere(int64_t tag, int64_t bytes);

  /// Receiver: the message under `tag` (tags are unique among the messages in flight),
  /// waiting for it. `bytes` holds it, or is undefined when it went some other way
  /// (`size` bytes). Throws ReceiveAborted after abort(), PeerError when the peer is gone.
  struct Taken {
    at::Tensor bytes;
    int64_t size = 0;
  };
  Taken take(int64_t tag);

  /// Stops every wait of this end now and later (a run that failed elsewhere); reset()
  /// allows them again.
  void abort();
  void reset();

  struct Control;

 private:
  ShmLink(const std::string& name, const ShmOptions& options, bool receiver, void* base, size_t size);
  /// Waits until `ready()` or `word` moves, on behalf of `what` (for the error message).
  void wait(std::atomic<uint32_t>& word, std::atomic<uint32_t>& waiters, const std::function<bool()>& ready,
            const char* what);
  /// Receiver: moves every published marker's message out of the ring into `kept_`.
  void drain();
  bool peer_gone(std::string& why) const;

  std::string name_;
  ShmOptions options_;
  bool receiver_;
  void* base_;
  size_t size_;
  Control* control_;
  uint8_t* ring_;
  std::mutex mutex_;                  ///< this end's threads (several stages may share a peer)
  uint64_t reserved_ = 0;             ///< sender: the byte position after the last message
  std::map<int64_t, Taken> kept_;     ///< receiver: messages read, not yet taken
  std::atomic<bool> aborted_{false};
};

}  // namespace pipelab::dist
