#include "core/exec/remote_receives.h"

#include "core/dist/wire.h"

namespace pipelab {

RemoteReceives::RemoteReceives(const Schedule& s, dist::ProcessGroup& group, Mailboxes& mailboxes,
                               const std::function<bool(int)>& local, const std::function<int(int)>& rank_of)
    : group_(group), mailboxes_(mailboxes), rank_of_(rank_of) {
  group_.reset_receives();
  for (int d = 0; d < s.devices(); ++d) {
    if (!local(d)) continue;
    std::vector<Action> remote;
    for (const Action& a : s.device(d)) {
      if (!is_receive(a.kind)) continue;
      const int from = peer(a);
      if (rank_of(from) != group.rank()) remote.push_back(a);
    }
    if (!remote.empty()) threads_.emplace_back([this, remote] { receive_all(remote); });
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

void RemoteReceives::receive_all(const std::vector<Action>& receives) {
  try {
    for (const Action& a : receives) {
      const char kind = payload(a.kind);
      const int from = peer(a);
      Message m = dist::receive_message(group_, rank_of_(from), kind, a.mb, a.stage);
      mailboxes_.send(from, a.stage, kind, a.mb, {std::move(m), nullptr});
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
