#include "core/exec/remote_receives.h"

#include <fmt/format.h>

#include "core/device/streams.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

constexpr size_t kWindow = 32;
constexpr int64_t kBudget = int64_t{64} << 20;

}  // namespace

RemoteReceives::RemoteReceives(const Schedule& s, dist::ProcessGroup& group, const std::function<bool(int)>& local,
                               RemoteLinks links)
    : group_(group), links_(std::move(links)), inboxes_(static_cast<size_t>(s.devices())) {
  group_.reset_receives();
  if (links_.host) links_.host->reset();
  for (int d = 0; d < s.devices(); ++d) {
    if (!local(d)) continue;
    Inbox& inbox = inboxes_[static_cast<size_t>(d)];
    for (const Action& a : s.device(d)) {
      if (is_receive(a.kind) && remote(peer(a))) inbox.receives.push_back(a);
    }
    post_ahead(inbox);
  }
}

RemoteReceives::~RemoteReceives() {
  // Receives posted but never taken (a run that failed): aborted, then dropped.
  for (const Inbox& inbox : inboxes_) {
    if (!inbox.ahead.empty()) {
      stop();
      break;
    }
  }
  inboxes_.clear();
  if (stopped_) {
    group_.reset_receives();  // the group's other receives (results, weights) work again
    if (links_.host) links_.host->reset();
  }
}

bool RemoteReceives::remote(int from) const { return links_.rank_of(from) != group_.rank(); }

dist::Route RemoteReceives::route(const Action& a) const {
  const int from = peer(a);
  const int rank = links_.rank_of(from);
  return dist::Route{from,
                     a.stage,
                     payload(a.kind),
                     a.mb,
                     rank,
                     links_.channel(from, a.stage),
                     links_.host ? links_.host->from(rank) : nullptr};
}

void RemoteReceives::post_ahead(Inbox& inbox) {
  while (inbox.posted < inbox.receives.size() &&
         (inbox.posted == inbox.next || (inbox.posted - inbox.next < kWindow && inbox.bytes < kBudget))) {
    inbox.ahead.push_back(dist::post_message(group_, route(inbox.receives[inbox.posted++]), *links_.sizes));
    inbox.bytes += dist::posted_bytes(*inbox.ahead.back());
  }
}

Parcel RemoteReceives::take(int device, int to, int from, char kind, int mb) {
  Inbox& inbox = inboxes_.at(static_cast<size_t>(device));
  PIPELAB_ASSERT(inbox.next < inbox.receives.size(), "device {} takes a remote message it has no RECV action for",
                 device);
  const Action& a = inbox.receives[inbox.next];
  PIPELAB_ASSERT(a.stage == to && peer(a) == from && payload(a.kind) == kind && a.mb == mb,
                 "device {} takes {}{} from stage {} out of order", device, kind, mb, from);
  try {
    post_ahead(inbox);
    const std::shared_ptr<dist::PostedMessage> next = std::move(inbox.ahead.front());
    inbox.ahead.pop_front();
    inbox.bytes -= dist::posted_bytes(*next);
    ++inbox.next;
    // A device channel's tensors land on this device's current stream: nothing to wait for.
    return {dist::finish_message(group_, *next, *links_.sizes, links_.device(to)), nullptr};
  } catch (const dist::ReceiveAborted&) {
    throw Cancelled();
  }
}

void RemoteReceives::stop() {
  stopped_ = true;
  group_.abort_receives();
  if (links_.host) links_.host->abort();
}

}  // namespace pipelab
