#include "core/processes/shm_link.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "core/processes/process_group.h"
#include "core/util/error.h"

namespace pipelab::dist {
namespace {

constexpr uint64_t kMagic = 0x70697065'6c616231ULL;  // "pipelab1"
constexpr int64_t kPage = 4096;
constexpr int64_t kMessageAlign = 64;  // every message starts on a cache line (and any dtype's alignment)
constexpr int kReceiver = 0, kSender = 1;

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

long futex(std::atomic<uint32_t>& word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word lies in memory that two processes share.
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op, value, timeout, nullptr, 0);
}

void wake_all(std::atomic<uint32_t>& word) { futex(word, FUTEX_WAKE, INT_MAX, nullptr); }

struct Marker {
  int64_t tag;
  uint64_t start;  ///< byte position in the ring (ring messages)
  int64_t size;
  int64_t elsewhere;  ///< 1: the message went over Gloo
};

}  // namespace

/// The segment's first page. Each end writes only its own fields, so no lock is shared.
struct ShmLink::Control {
  uint64_t magic;
  uint64_t nonce;
  int64_t ring_bytes;
  int64_t markers;
  std::atomic<int32_t> pid[2];       ///< receiver, sender
  std::atomic<uint32_t> closed[2];   ///< set when that end goes away
  alignas(64) std::atomic<uint64_t> marker_tail;  ///< sender: markers published
  alignas(64) std::atomic<uint64_t> marker_head;  ///< receiver: markers read
  alignas(64) std::atomic<uint64_t> byte_head;    ///< receiver: ring bytes released
  alignas(64) std::atomic<uint32_t> published;    ///< futex word: moves with every marker published
  std::atomic<uint32_t> receiver_waiters;
  alignas(64) std::atomic<uint32_t> released;     ///< futex word: moves with every marker read
  std::atomic<uint32_t> sender_waiters;
};

namespace {

int64_t segment_bytes(const ShmOptions& o) {
  return round_up(sizeof(ShmLink::Control), kPage) + round_up(int64_t{o.markers} * sizeof(Marker), kPage) +
         round_up(o.ring_bytes, kPage);
}

Marker* markers_of(ShmLink::Control* c) {
  return reinterpret_cast<Marker*>(reinterpret_cast<uint8_t*>(c) + round_up(sizeof(ShmLink::Control), kPage));
}

}  // namespace

ShmLink::ShmLink(const std::string& name, const ShmOptions& options, bool receiver, void* base, size_t size)
    : name_(name), options_(options), receiver_(receiver), base_(base), size_(size),
      control_(static_cast<Control*>(base)) {
  ring_ = reinterpret_cast<uint8_t*>(markers_of(control_)) + round_up(control_->markers * int64_t{sizeof(Marker)}, kPage);
  options_.ring_bytes = control_->ring_bytes;
  options_.markers = static_cast<int>(control_->markers);
  control_->pid[receiver ? kReceiver : kSender].store(static_cast<int32_t>(::getpid()));
}

std::unique_ptr<ShmLink> ShmLink::create(const std::string& name, const ShmOptions& options, std::string& why) {
  PIPELAB_ASSERT(options.ring_bytes > 0 && options.markers > 0, "a shared-memory ring of {} bytes, {} markers",
                 options.ring_bytes, options.markers);
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    why = fmt::format("cannot make the shared-memory segment {} ({})", name, std::strerror(errno));
    return nullptr;
  }
  const int64_t size = segment_bytes(options);
  // Committed now: a /dev/shm too small for it (Docker's default is 64 MiB) fails here,
  // clearly, instead of with SIGBUS when a message first touches the missing pages.
  int error = ::ftruncate(fd, size) == 0 ? ::posix_fallocate(fd, 0, size) : errno;
  void* base = error == 0 ? ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                          : MAP_FAILED;
  if (error == 0 && base == MAP_FAILED) error = errno;
  ::close(fd);
  if (error != 0) {
    ::shm_unlink(name.c_str());
    why = fmt::format("cannot commit {} MiB of shared memory in /dev/shm ({})", size >> 20, std::strerror(error));
    return nullptr;
  }
  auto* c = new (base) Control();
  c->magic = kMagic;
  c->nonce = std::random_device{}() * 0x100000001ULL ^ static_cast<uint64_t>(::getpid());
  c->ring_bytes = round_up(options.ring_bytes, kPage);
  c->markers = options.markers;
  return std::unique_ptr<ShmLink>(new ShmLink(name, options, true, base, static_cast<size_t>(size)));
}

std::unique_ptr<ShmLink> ShmLink::open(const std::string& name, const ShmOptions& options, uint64_t nonce,
                                       std::string& why) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    why = fmt::format("cannot open the shared-memory segment {} ({})", name, std::strerror(errno));
    return nullptr;
  }
  struct stat st {};
  void* base = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(Control))) {
    base = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  ::close(fd);
  if (base == MAP_FAILED) {
    why = fmt::format("cannot map the shared-memory segment {}", name);
    return nullptr;
  }
  const auto* c = static_cast<const Control*>(base);
  // Another machine's segment of the same name (another /dev/shm) is not this one.
  if (c->magic != kMagic || c->nonce != nonce || st.st_size != segment_bytes({c->ring_bytes, static_cast<int>(c->markers)})) {
    ::munmap(base, static_cast<size_t>(st.st_size));
    why = fmt::format("the shared-memory segment {} is not the one its receiver made (another /dev/shm?)", name);
    return nullptr;
  }
  return std::unique_ptr<ShmLink>(new ShmLink(name, options, false, base, static_cast<size_t>(st.st_size)));
}

ShmLink::~ShmLink() {
  control_->closed[receiver_ ? kReceiver : kSender].store(1);
  wake_all(control_->published);
  wake_all(control_->released);
  if (receiver_) unlink();
  ::munmap(base_, size_);
}

uint64_t ShmLink::nonce() const { return control_->nonce; }

void ShmLink::unlink() {
  if (name_.empty()) return;
  ::shm_unlink(name_.c_str());
  name_.clear();
}

bool ShmLink::peer_gone(std::string& why) const {
  const int peer = receiver_ ? kSender : kReceiver;
  if (control_->closed[peer].load() != 0) {
    why = "it closed its end of the shared memory (it stopped)";
    return true;
  }
  const int32_t pid = control_->pid[peer].load();
  if (pid <= 0 || pid == ::getpid()) return false;
  // A killed process its parent has not reaped yet still answers kill(): its state says.
  char state = 0;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (std::getline(stat, line) && line.rfind(')') != std::string::npos && line.rfind(')') + 2 < line.size()) {
    state = line[line.rfind(')') + 2];
  }
  if ((::kill(pid, 0) != 0 && errno == ESRCH) || state == 'Z' || state == 'X') {
    why = fmt::format("its process {} is gone", pid);
    return true;
  }
  return false;
}

void ShmLink::wait(std::atomic<uint32_t>& word, std::atomic<uint32_t>& waiters, const std::function<bool()>& ready,
                   const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto spin_until = start + std::chrono::duration<double, std::micro>(options_.spin_us);
  while (!ready() && Clock::now() < spin_until) {
    if (aborted_) throw ReceiveAborted();
  }
  const timespec nap{0, 20'000'000};  // how often a sleeping wait checks on its peer
  while (!ready()) {
    if (aborted_) throw ReceiveAborted();
    std::string why;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (peer_gone(why) || waited > options_.timeout_seconds) {
      if (why.empty()) why = fmt::format("nothing came for {} s", options_.timeout_seconds);
      throw PeerError(fmt::format("rank {} lost rank {} waiting for {} over shared memory: {}. Fix: see rank {}'s own "
                                  "log for why it stopped (a kill, a failure).",
                                  options_.self_rank, options_.peer_rank, what, why, options_.peer_rank));
    }
    // The word is read before the waiter is counted and the condition checked again, so a
    // publication in between either shows in ready() or moves the word (no lost wake-up).
    const uint32_t seen = word.load();
    waiters.fetch_add(1);
    if (!ready() && !aborted_) futex(word, FUTEX_WAIT, seen, &nap);
    waiters.fetch_sub(1);
  }
}

bool ShmLink::send(int64_t tag, int64_t bytes, const std::function<void(uint8_t*)>& write) {
  PIPELAB_ASSERT(!receiver_, "the receiving end of {} sends", name_);
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t ring = options_.ring_bytes;
  const int64_t need = round_up(bytes, kMessageAlign);
  if (need > ring) return false;
  uint64_t start = reserved_;
  const int64_t at = static_cast<int64_t>(start % static_cast<uint64_t>(ring));
  if (at + need > ring) start += static_cast<uint64_t>(ring - at);  // to the ring's start; the gap is freed with it
  if (start + static_cast<uint64_t>(need) - control_->byte_head.load(std::memory_order_acquire) >
      static_cast<uint64_t>(ring)) {
    return false;
  }
  const uint64_t tail = control_->marker_tail.load(std::memory_order_relaxed);
  wait(control_->released, control_->sender_waiters,
       [&] { return tail - control_->marker_head.load(std::memory_order_acquire) < static_cast<uint64_t>(options_.markers); },
       "room for a message");
  write(ring_ + start % static_cast<uint64_t>(ring));
  reserved_ = start + static_cast<uint64_t>(need);
  markers_of(control_)[tail % static_cast<uint64_t>(options_.markers)] = {tag, start, bytes, 0};
  control_->marker_tail.store(tail + 1, std::memory_order_release);
  control_->published.fetch_add(1);
  if (control_->receiver_waiters.load() > 0) wake_all(control_->published);
  return true;
}

void ShmLink::sent_elsewhere(int64_t tag, int64_t bytes) {
  PIPELAB_ASSERT(!receiver_, "the receiving end of {} sends", name_);
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t tail = control_->marker_tail.load(std::memory_order_relaxed);
  wait(control_->released, control_->sender_waiters,
       [&] { return tail - control_->marker_head.load(std::memory_order_acquire) < static_cast<uint64_t>(options_.markers); },
       "room for a message");
  markers_of(control_)[tail % static_cast<uint64_t>(options_.markers)] = {tag, 0, bytes, 1};
  control_->marker_tail.store(tail + 1, std::memory_order_release);
  control_->published.fetch_add(1);
  if (control_->receiver_waiters.load() > 0) wake_all(control_->published);
}

void ShmLink::drain() {
  const uint64_t ring = static_cast<uint64_t>(options_.ring_bytes);
  uint64_t head = control_->marker_head.load(std::memory_order_relaxed);
  const uint64_t tail = control_->marker_tail.load(std::memory_order_acquire);
  for (; head < tail; ++head) {
    const Marker m = markers_of(control_)[head % static_cast<uint64_t>(options_.markers)];
    PIPELAB_ASSERT(m.size >= 0 && (m.elsewhere != 0 || m.start % ring + static_cast<uint64_t>(m.size) <= ring),
                   "a shared-memory marker of {} bytes at {}", m.size, m.start);
    Taken t;
    t.size = m.size;
    if (m.elsewhere == 0) {
      t.bytes = at::empty({m.size}, at::kByte);
      std::memcpy(t.bytes.data_ptr(), ring_ + m.start % ring, static_cast<size_t>(m.size));
      control_->byte_head.store(m.start + static_cast<uint64_t>(round_up(m.size, kMessageAlign)), std::memory_order_release);
    }
    PIPELAB_ASSERT(kept_.emplace(m.tag, std::move(t)).second, "two messages in flight under tag {} on {}", m.tag, name_);
    control_->marker_head.store(head + 1, std::memory_order_release);
    control_->released.fetch_add(1);
    if (control_->sender_waiters.load() > 0) wake_all(control_->released);
  }
}

ShmLink::Taken ShmLink::take(int64_t tag) {
  PIPELAB_ASSERT(receiver_, "the sending end of {} receives", name_);
  for (;;) {
    uint32_t seen;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Read before draining: whatever is published after this moves the word.
      seen = control_->published.load();
      drain();
      const auto it = kept_.find(tag);
      if (it != kept_.end()) {
        Taken t = std::move(it->second);
        kept_.erase(it);
        return t;
      }
    }
    wait(control_->published, control_->receiver_waiters, [&] { return control_->published.load() != seen; },
         "a message");
  }
}

void ShmLink::abort() {
  aborted_ = true;
  wake_all(control_->published);
  wake_all(control_->released);
}

void ShmLink::reset() { aborted_ = false; }

}  // namespace pipelab::dist
