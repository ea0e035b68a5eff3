#include "core/exec/remote_receives.h"

#include <deque>

#include "core/device/streams.h"
#include "core/dist/wire.h"

namespace pipelab {

RemoteReceives::RemoteReceives(const Schedule& s, dist::ProcessGroup& group, Mailboxes& mailboxes,
                               const std::function<bool(int)>& local, RemoteLinks links)
    : group_(group), mailboxes_(mailboxes), links_(std::move(links)) {
  group_.reset_receives();
  for (int d = 0; d < s.devices(); ++d) {
    if (!local(d)) continue;
    std::vector<Action> remote;
    for (const Action& a : s.device(d)) {
      if (!is_receive(a.kind)) continue;
      const int from = peer(a);
      if (links_.rank_of(from) != group.rank()) remote.push_back(a);
    }
    if (!remote.empty()) threads_.emplace_back([this, d, remote] { receive_all(d, remote); });
  }
}

RemoteReceives::~RemoteReceives() {
  bool finished = true;
  for (const std::thread& t : threads_) finished = finished && !t.joinable();
  if (!finished) stop();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  // The group's other receives (results, weights) work again.
  if (stopped_) group_.reset_receives();
}

void RemoteReceives::receive_all(int device, const std::vector<Action>& receives) {
  constexpr size_t kWindow = 32;
  constexpr int64_t kBudget = int64_t{64} << 20;
  try {
    // Device channels deliver on this thread's stream of the receiving GPU, a stream of its
    // own (negative numbers are no stage's).
    const c10::Device here = links_.device(receives.front().stage);
    device::StreamScope stream(here, -1 - device);
    const auto route = [this](const Action& a) {
      const int from = peer(a);
      return dist::Route{from, a.stage, payload(a.kind), a.mb, links_.rank_of(from), links_.channel(from, a.stage)};
    };
    std::deque<std::shared_ptr<dist::PostedMessage>> ahead;
    size_t posted = 0;
    int64_t bytes = 0;
    for (size_t k = 0; k < receives.size(); ++k) {
      while (posted < receives.size() && (posted == k || (posted - k < kWindow && bytes < kBudget))) {
        ahead.push_back(dist::post_message(group_, route(receives[posted++]), *links_.sizes));
        bytes += dist::posted_bytes(*ahead.back());
      }
      const std::shared_ptr<dist::PostedMessage> next = std::move(ahead.front());
      ahead.pop_front();
      bytes -= dist::posted_bytes(*next);
      const Action& a = receives[k];
      Message m = dist::finish_message(group_, *next, *links_.sizes, here);
      device::Ready ready = route(a).channel ? device::record_ready(here) : nullptr;
      mailboxes_.send(peer(a), a.stage, payload(a.kind), a.mb, {std::move(m), std::move(ready)});
    }
  } catch (const dist::ReceiveAborted&) {
    // stop(): the run ends without these messages.
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    mailboxes_.cancel();  // the devices waiting for this peer stop too
  }
}

void RemoteReceives::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  group_.abort_receives();
}

void RemoteReceives::finish() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace pipelab
