#include "core/processes/process_group.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include "core/processes/device_channel.h"
#include "core/processes/launch_env.h"
#include "core/util/error.h"

#ifdef PIPELAB_HAVE_GLOO
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace pipelab::dist {

Endpoint Endpoint::parse(const std::string& text, const std::string& what) {
  Endpoint e;
  const size_t colon = text.rfind(':');
  const std::string port = colon == std::string::npos ? text : text.substr(colon + 1);
  if (colon != std::string::npos) e.host = text.substr(0, colon);
  // An IPv6 address is written in brackets beside a port ([::1]:29500, as torchrun writes
  // MASTER_ADDR); the store connects to the bare address.
  if (e.host.size() > 2 && e.host.front() == '[' && e.host.back() == ']') e.host = e.host.substr(1, e.host.size() - 2);
  try {
    size_t used = 0;
    e.port = std::stoi(port, &used);
    if (used != port.size() || e.port <= 0 || e.port > 65535 || e.host.empty()) throw std::invalid_argument("");
  } catch (const std::exception&) {
    throw UserError(fmt::format("{}: '{}' is not host:port. Fix: e.g. 127.0.0.1:29500.", what, text));
  }
  return e;
}

std::string Endpoint::str() const {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

int free_port() {
  // Bind to port 0 and let the kernel choose; another process may take it before the
  // caller binds it again, which a local launcher accepts (it would fail clearly).
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw UserError(fmt::format("cannot open a socket ({}).", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) throw UserError("cannot find a free port on 127.0.0.1. Fix: pass one explicitly (--master-port).");
  return ntohs(addr.sin_port);
}

namespace {

/// One line of an exception's message (c10's errors carry a C++ backtrace that says nothing
/// to a user), without the source location Gloo puts in front
/// ("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer"):
/// a user needs the reason, not our dependency's file names.
std::string first_line(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10_error ? c10_error->what_without_backtrace() : e.what();
  text = text.substr(0, text.find('\n'));
  for (size_t open = text.find('['); open != std::string::npos; open = text.find('[', open)) {
    const size_t close = text.find(']', open);
    if (close == std::string::npos) break;
    const std::string inside = text.substr(open + 1, close - open - 1);
    const bool source = inside.find('/') != std::string::npos && inside.find(':') != std::string::npos &&
                        (inside.find(".cc:") != std::string::npos || inside.find(".cpp:") != std::string::npos ||
                         inside.find(".h:") != std::string::npos);
    if (!source) {
      open = close;
      continue;
    }
    text.erase(open, close + 1 - open);
    while (open < text.size() && text[open] == ' ') text.erase(open, 1);
  }
  return text;
}

/// c10d logs each broken store socket as a warning with a 20-frame C++ backtrace, on every
/// rank, before the call that failed throws; pipelab says what happened in its own error
/// (PeerError), so these go unless --debug (PIPELAB_DEBUG) asks for LibTorch's detail. Once
/// per process: a rank keeps its process group until it ends.
void quiet_c10d_warnings() {
  static const bool once = [] {
    const char* debug = std::getenv("PIPELAB_DEBUG");
    if (debug == nullptr || std::string(debug) != "1") FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, 2);
    return true;
  }();
  (void)once;
}

/// `key` of exchange() as words: "stage_metrics2" is "the stage metrics".
std::string key_words(std::string key) {
  while (!key.empty() && std::isdigit(static_cast<unsigned char>(key.back()))) key.pop_back();
  std::replace(key.begin(), key.end(), '_', ' ');
  return "the " + key;
}

}  // namespace

#ifdef PIPELAB_HAVE_GLOO

bool available() { return true; }

namespace {

/// Whether torchrun's agent serves the store at `master` (its own MASTER_ADDR:MASTER_PORT,
/// TORCHELASTIC_USE_AGENT_STORE): then every rank joins as a client, rank 0 too, as
/// torch.distributed's env:// rendezvous does (a second server there would fail).
bool agent_serves(const std::optional<LaunchEnv>& env, const Endpoint& master) {
  return env && env->agent_store && env->master.str() == master.str();
}

/// This rank's Gloo devices, as torch.distributed picks them: the interfaces named in
/// GLOO_SOCKET_IFNAME (comma-separated), else this machine's own address. A rendezvous on
/// the loopback means every rank is on this machine: they meet there.
std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_devices(const Endpoint& master) {
  std::vector<std::shared_ptr<::gloo::transport::Device>> out;
  if (const char* names = std::getenv("GLOO_SOCKET_IFNAME"); names && *names) {
    std::string list = names;
    for (size_t p = 0, q; p <= list.size(); p = q + 1) {
      q = std::min(list.find(',', p), list.size());
      if (q > p) out.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(list.substr(p, q - p)));
    }
    if (!out.empty()) return out;
  }
  const bool loopback = master.host == "localhost" || master.host.rfind("127.", 0) == 0 || master.host == "::1";
  out.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname(master.host)
                         : c10d::ProcessGroupGloo::createDefaultDevice());
  return out;
}

}  // namespace

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::chrono::milliseconds timeout;
  std::mutex mutex;  // guards sends, receives and aborted
  std::deque<c10::intrusive_ptr<c10d::Work>> sends;
  std::set<c10d::Work*> receives;  ///< waiting now
  bool aborted = false;
};

ProcessGroup::ProcessGroup(const GroupOptions& options) : options_(options), impl_(std::make_unique<Impl>()) {
  quiet_c10d_warnings();
  impl_->timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000));
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(options.master.port);
  // The launcher's store and restart count. An environment that does not add up was refused
  // by `pipelab run` already, unless --rank and --world-size overrode it: then it is not read.
  std::optional<LaunchEnv> env;
  try {
    env = launch_env();
  } catch (const UserError&) {
  }
  so.isServer = options.rank == 0 && !agent_serves(env, options.master);
  so.numWorkers = static_cast<size_t>(options.world_size);
  so.waitWorkers = true;
  so.timeout = impl_->timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(options.master.host, so);
    // A group torchrun restarted may meet in the store of the attempt before it, whose keys
    // (the dead ranks' addresses) must not be read as this attempt's.
    if (env && env->restart_count > 0) {
      impl_->store = c10::make_intrusive<c10d::PrefixStore>(fmt::format("attempt{}", env->restart_count), impl_->store);
    }
    auto go = c10d::ProcessGroupGloo::Options::create();
    go->timeout = impl_->timeout;
    go->devices = gloo_devices(options.master);
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, options.rank, options.world_size, go);
  } catch (const std::exception& e) {
    const std::string why = first_line(e);
    if (why.find("ddress already in use") != std::string::npos || why.find("EADDRINUSE") != std::string::npos) {
      throw UserError(fmt::format("rank {} cannot serve the rendezvous at {}: the port is in use. Fix: give another "
                                  "port (--master HOST:PORT), or let `pipelab launch` pick a free one.",
                                  options.rank, options.master.str()));
    }
    throw UserError(fmt::format("rank {} of {} could not join the process group at {}: {}. Fix: start every rank "
                                "with the same --master and --world-size (or use `pipelab launch`), and check that "
                                "the port is free.",
                                options.rank, options.world_size, options.master.str(), why));
  }
}

ProcessGroup::ProcessGroup(const GroupOptions& options, std::unique_ptr<Impl> impl)
    : options_(options), impl_(std::move(impl)) {}

std::unique_ptr<ProcessGroup> ProcessGroup::subgroup(const std::vector<int>& ranks, const std::string& name) {
  const auto me = std::find(ranks.begin(), ranks.end(), options_.rank);
  PIPELAB_ASSERT(me != ranks.end(), "rank {} asked for subgroup {} without being in it", options_.rank, name);
  GroupOptions o = options_;
  o.rank = static_cast<int>(me - ranks.begin());
  o.world_size = static_cast<int>(ranks.size());
  auto impl = std::make_unique<Impl>();
  impl->timeout = impl_->timeout;
  try {
    impl->store = c10::make_intrusive<c10d::PrefixStore>("pipelab/" + name, impl_->store);
    auto go = c10d::ProcessGroupGloo::Options::create();
    go->timeout = impl->timeout;
    go->devices = gloo_devices(options_.master);
    impl->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, o.rank, o.world_size, go);
  } catch (const std::exception& e) {
    throw PeerError(fmt::format("rank {} could not join the group of ranks {} ({}): {}", options_.rank,
                                fmt::join(ranks, ", "), name, first_line(e)));
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(o, std::move(impl)));
}

std::unique_ptr<DeviceChannel> ProcessGroup::device_channel(int sender, int receiver, const std::string& name) {
  PIPELAB_ASSERT(options_.rank == sender || options_.rank == receiver, "rank {} asked for channel {} of ranks {} and {}",
                 options_.rank, name, sender, receiver);
  auto store = c10::make_intrusive<c10d::PrefixStore>("pipelab/" + name, impl_->store);
  return nccl_channel(store, options_.rank == sender ? 0 : 1, options_.timeout_seconds);
}

ProcessGroup::~ProcessGroup() {
  try {
    complete_sends();
  } catch (...) {  // a peer that already left; nothing to report from a destructor
  }
}

void ProcessGroup::send(const at::Tensor& t, int dst, int tag) {
  std::vector<at::Tensor> ts{t.contiguous()};
  auto work = impl_->group->send(ts, dst, tag);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->sends.push_back(std::move(work));
  // Finished sends are dropped as we go, so a long run does not keep every tensor alive.
  while (!impl_->sends.empty() && impl_->sends.front()->isCompleted()) {
    impl_->sends.front()->wait(impl_->timeout);
    impl_->sends.pop_front();
  }
}

struct ProcessGroup::Pending {
  Impl* impl = nullptr;
  at::Tensor tensor;  // kept alive until the receive completes
  int src = 0;
  c10::intrusive_ptr<c10d::Work> work;
  ~Pending() {
    // One never waited for (a run stopped) leaves abort_receives()'s list with it.
    if (!impl || !work) return;
    std::lock_guard<std::mutex> lock(impl->mutex);
    impl->receives.erase(work.get());
  }
};

std::shared_ptr<ProcessGroup::Pending> ProcessGroup::post_recv(const at::Tensor& t, int src, int tag) {
  auto pending = std::make_shared<Pending>();
  pending->impl = impl_.get();
  pending->tensor = t;
  pending->src = src;
  std::vector<at::Tensor> ts{t};
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->aborted) throw ReceiveAborted();
  pending->work = impl_->group->recv(ts, src, tag);
  impl_->receives.insert(pending->work.get());
  return pending;
}

void ProcessGroup::wait_recv(Pending& pending) {
  try {
    pending.work->wait(impl_->timeout);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->receives.erase(pending.work.get());
    if (impl_->aborted) throw ReceiveAborted();
    throw PeerError(fmt::format("rank {} lost rank {} (waiting {} s at most): {}. Fix: see rank {}'s own log for why "
                                "it stopped (a kill, a failure, the network).",
                                options_.rank, pending.src, options_.timeout_seconds, first_line(e), pending.src));
  }
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->receives.erase(pending.work.get());
}

void ProcessGroup::recv(at::Tensor& t, int src, int tag) { wait_recv(*post_recv(t, src, tag)); }

void ProcessGroup::abort_receives() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->aborted = true;
  for (c10d::Work* w : impl_->receives) w->abort();
}

void ProcessGroup::reset_receives() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->aborted = false;
}

void ProcessGroup::complete_sends() {
  std::deque<c10::intrusive_ptr<c10d::Work>> sends;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    sends.swap(impl_->sends);
  }
  try {
    for (auto& w : sends) w->wait(impl_->timeout);
  } catch (const std::exception& e) {
    throw PeerError(fmt::format("rank {}: a message could not be delivered (a peer left?): {}", options_.rank,
                                first_line(e)));
  }
}

std::vector<at::Tensor> ProcessGroup::all_gather(const at::Tensor& t) {
  std::vector<at::Tensor> in{t.contiguous()};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < size(); ++r) out[0].push_back(at::empty_like(in[0]));
  try {
    impl_->group->allgather(out, in)->wait(impl_->timeout);
  } catch (const std::exception& e) {
    throw PeerError(fmt::format("rank {}: all-gather failed (a peer left?): {}", options_.rank, first_line(e)));
  }
  return out[0];
}

void ProcessGroup::barrier() {
  try {
    impl_->group->barrier()->wait(impl_->timeout);
  } catch (const std::exception& e) {
    throw PeerError(lost_contact("waiting for the others at a barrier", e));
  }
}

std::string ProcessGroup::lost_contact(const std::string& doing, const std::exception& e) const {
  return fmt::format("rank {} lost contact with the other processes while {} ({}): one of them, or the launcher "
                     "that started them (torchrun's agent, srun), stopped, so this rank stops too. Fix: the first "
                     "error in the other ranks' output says why; then continue the run with the same command and "
                     "--resume",
                     options_.rank, doing, first_line(e));
}

std::vector<std::string> ProcessGroup::exchange(const std::string& key, const std::string& text) {
  std::vector<std::string> out;
  try {
    impl_->store->set(fmt::format("pipelab/{}/{}", key, options_.rank), std::vector<uint8_t>(text.begin(), text.end()));
    for (int r = 0; r < size(); ++r) {
      const std::vector<uint8_t> v = impl_->store->get(fmt::format("pipelab/{}/{}", key, r));
      out.emplace_back(v.begin(), v.end());
    }
  } catch (const std::exception& e) {
    throw PeerError(lost_contact("exchanging " + key_words(key) + " with the others", e));
  }
  return out;
}

#else

bool available() { return false; }

struct ProcessGroup::Impl {};

ProcessGroup::ProcessGroup(const GroupOptions& options) : options_(options) {
  throw UserError("this pipelab was built without c10d's Gloo headers, so it cannot run several processes. Fix: "
                  "install libgloo-dev (tools/setup.sh does) and rebuild.");
}
ProcessGroup::ProcessGroup(const GroupOptions& options, std::unique_ptr<Impl> impl)
    : options_(options), impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;
std::unique_ptr<ProcessGroup> ProcessGroup::subgroup(const std::vector<int>&, const std::string&) { return nullptr; }
std::unique_ptr<DeviceChannel> ProcessGroup::device_channel(int, int, const std::string&) { return nullptr; }
void ProcessGroup::send(const at::Tensor&, int, int) {}
void ProcessGroup::recv(at::Tensor&, int, int) {}
struct ProcessGroup::Pending {};
std::shared_ptr<ProcessGroup::Pending> ProcessGroup::post_recv(const at::Tensor&, int, int) { return nullptr; }
void ProcessGroup::wait_recv(Pending&) {}
void ProcessGroup::abort_receives() {}
void ProcessGroup::reset_receives() {}
void ProcessGroup::complete_sends() {}
std::vector<at::Tensor> ProcessGroup::all_gather(const at::Tensor&) { return {}; }
void ProcessGroup::barrier() {}
std::vector<std::string> ProcessGroup::exchange(const std::string&, const std::string& text) { return {text}; }

#endif

std::vector<at::Tensor> ProcessGroup::all_gather_rows(const at::Tensor& rows) {
  PIPELAB_ASSERT(rows.dim() == 2, "all_gather_rows() takes rows, not a tensor of {} dimensions", rows.dim());
  const at::Tensor mine = rows.to(at::kCPU).contiguous();
  const std::vector<at::Tensor> shapes = all_gather(at::tensor({mine.size(0), mine.size(1)}, at::kLong));
  int64_t longest = 0;
  for (const at::Tensor& shape : shapes) {
    PIPELAB_ASSERT(shape[1].item<int64_t>() == mine.size(1), "ranks gather rows of {} and {} columns",
                   shape[1].item<int64_t>(), mine.size(1));
    longest = std::max(longest, shape[0].item<int64_t>());
  }
  at::Tensor padded = at::zeros({longest, mine.size(1)}, mine.options());
  padded.narrow(0, 0, mine.size(0)).copy_(mine);
  std::vector<at::Tensor> all = all_gather(padded);
  for (size_t r = 0; r < all.size(); ++r) all[r] = all[r].narrow(0, 0, shapes[r][0].item<int64_t>());
  return all;
}


}  // namespace pipelab::dist
