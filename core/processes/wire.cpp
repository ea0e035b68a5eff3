#include "core/processes/wire.h"

#include <ATen/ATen.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/util/error.h"

namespace pipelab::dist {
namespace {

constexpr int64_t kMaxDims = 8;
constexpr int64_t kPerTensor = 3 + kMaxDims;  // dtype (-1: undefined), ndim, on the channel, sizes
constexpr int kParts = 16;
constexpr int64_t kMaxTensors = kParts - 1;  // part 0 is the message itself
/// values, extras, tag, the whole message's bytes, whether the tensors follow in it; the tensors
constexpr int64_t kFixed = 5;
constexpr int64_t kHeaderWords = kFixed + kMaxTensors * kPerTensor;
constexpr int64_t kHeaderBytes = kHeaderWords * 8;
constexpr int64_t kTensorAlign = 64;  // each tensor's bytes start on a cache line (and any dtype's alignment)
constexpr int kStageSlots = 16;  // stages told apart per process pair (interleaved placements)

int kind_index(char kind) {
  switch (kind) {
    case 'F': return 0;
    case 'B': return 1;
    case 'H': return 2;
    default: return 3;
  }
}

int64_t aligned(int64_t n) { return (n + kTensorAlign - 1) / kTensorAlign * kTensorAlign; }

}  // namespace

int message_tag(char kind, int mb, int to, int part) {
  PIPELAB_ASSERT(part < kParts && mb >= 0 && mb < (1 << 19) && to >= 0, "message tag out of range (mb {}, part {})", mb, part);
  return ((mb * 4 + kind_index(kind)) * kStageSlots + to % kStageSlots) * kParts + part;
}

int64_t WireSizes::capacity(int from, int to, char kind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = capacity_.find({from, to, kind});
  return std::max(kHeaderBytes, it == capacity_.end() ? 0 : it->second);
}

void WireSizes::saw(int from, int to, char kind, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t& most = seen_[{from, to, kind}];
  most = std::max(most, bytes);
}

void WireSizes::end_run() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [edge, bytes] : seen_) capacity_[edge] = std::max(capacity_[edge], bytes);
  seen_.clear();
}

namespace {

/// A message laid out as one buffer: the header, then each host tensor at its offset.
struct Layout {
  std::vector<int64_t> header;
  std::vector<at::Tensor> tensors;  ///< values, then extras
  std::vector<at::Tensor> host;     ///< what goes the host's way (undefined: nothing, or a device channel's)
  std::vector<int64_t> offset;
  int64_t end = kHeaderBytes;       ///< the whole buffer's bytes
};

Layout layout_of(const Message& m, const Route& route) {
  Layout l;
  l.tensors = m.values;
  l.tensors.insert(l.tensors.end(), m.extra.begin(), m.extra.end());
  if (static_cast<int64_t>(l.tensors.size()) > kMaxTensors) {
    throw UserError(fmt::format("a message of {} tensors between stages {} and {}: at most {} travel between processes. "
                                "Fix: cut the model where fewer skip connections are in transit.",
                                l.tensors.size(), route.from, route.to, kMaxTensors));
  }
  std::vector<int64_t>& h = l.header;
  h.assign(kHeaderWords, 0);
  h[0] = static_cast<int64_t>(m.values.size());
  h[1] = static_cast<int64_t>(m.extra.size());
  h[2] = m.tag;
  l.host.resize(l.tensors.size());
  l.offset.assign(l.tensors.size(), 0);
  for (size_t i = 0; i < l.tensors.size(); ++i) {
    const at::Tensor& t = l.tensors[i];
    const int64_t at0 = kFixed + static_cast<int64_t>(i) * kPerTensor;
    if (!t.defined()) {
      h[at0] = -1;
      continue;
    }
    PIPELAB_ASSERT(t.dim() <= kMaxDims, "a {}-dimensional message tensor", t.dim());
    h[at0] = static_cast<int64_t>(t.scalar_type());
    h[at0 + 1] = t.dim();
    h[at0 + 2] = route.channel && t.is_cuda() ? 1 : 0;
    for (int64_t d = 0; d < t.dim(); ++d) h[at0 + 3 + d] = t.size(d);
    if (h[at0 + 2] != 0) continue;
    l.host[i] = t.detach().to(at::kCPU).contiguous();
    l.offset[i] = aligned(l.end);
    l.end = l.offset[i] + static_cast<int64_t>(l.host[i].nbytes());
  }
  h[3] = l.end;
  return l;
}

/// Writes the header (saying whether the tensors follow inline) and, if they do, the tensors.
void write_buffer(Layout& l, bool inline_tensors, uint8_t* bytes) {
  l.header[4] = inline_tensors ? 1 : 0;
  std::memcpy(bytes, l.header.data(), kHeaderBytes);
  for (size_t i = 0; inline_tensors && i < l.host.size(); ++i) {
    if (l.host[i].defined()) std::memcpy(bytes + l.offset[i], l.host[i].data_ptr(), l.host[i].nbytes());
  }
}

void send_device_tensors(const Layout& l, const Route& route) {
  for (size_t i = 0; i < l.tensors.size(); ++i) {
    if (l.tensors[i].defined() && !l.host[i].defined()) route.channel->send(l.tensors[i].detach());
  }
}

at::Tensor whole_buffer(Layout& l) {
  at::Tensor buffer = at::empty({l.end}, at::kByte);
  write_buffer(l, true, static_cast<uint8_t*>(buffer.data_ptr()));
  return buffer;
}

}  // namespace

void send_message(ProcessGroup& group, const Message& m, const Route& route, WireSizes& sizes) {
  Layout l = layout_of(m, route);
  const int tag = message_tag(route.kind, route.mb, route.to, 0);
  if (route.link) {
    if (!route.link->send(tag, l.end, [&](uint8_t* at) { write_buffer(l, true, at); })) {
      group.send(whole_buffer(l), route.peer, tag);
      route.link->sent_elsewhere(tag, l.end);
    }
    send_device_tensors(l, route);
    return;
  }
  const bool fits = l.end <= sizes.capacity(route.from, route.to, route.kind);
  at::Tensor buffer = fits ? whole_buffer(l) : at::empty({kHeaderBytes}, at::kByte);
  if (!fits) write_buffer(l, false, static_cast<uint8_t*>(buffer.data_ptr()));
  group.send(buffer, route.peer, tag);
  for (size_t i = 0; i < l.tensors.size(); ++i) {
    if (l.host[i].defined() && !fits) {
      group.send(l.host[i], route.peer, message_tag(route.kind, route.mb, route.to, static_cast<int>(i) + 1));
    }
  }
  send_device_tensors(l, route);
  sizes.saw(route.from, route.to, route.kind, l.end);
}

struct PostedMessage {
  Route route;
  at::Tensor buffer;
  std::shared_ptr<ProcessGroup::Pending> pending;
};

std::shared_ptr<PostedMessage> post_message(ProcessGroup& group, const Route& route, const WireSizes& sizes) {
  auto posted = std::make_shared<PostedMessage>();
  posted->route = route;
  if (route.link) return posted;  // the link's ring needs nothing posted
  posted->buffer = at::empty({sizes.capacity(route.from, route.to, route.kind)}, at::kByte);
  posted->pending = group.post_recv(posted->buffer, route.peer, message_tag(route.kind, route.mb, route.to, 0));
  return posted;
}

int64_t posted_bytes(const PostedMessage& posted) { return posted.buffer.defined() ? posted.buffer.numel() : 0; }

Message finish_message(ProcessGroup& group, PostedMessage& posted, WireSizes& sizes, const c10::Device& device) {
  const Route& route = posted.route;
  if (route.link) {
    const int tag = message_tag(route.kind, route.mb, route.to, 0);
    ShmLink::Taken taken = route.link->take(tag);
    if (!taken.bytes.defined()) {
      taken.bytes = at::empty({taken.size}, at::kByte);
      group.recv(taken.bytes, route.peer, tag);
    }
    posted.buffer = taken.bytes;
  } else {
    group.wait_recv(*posted.pending);
  }
  const at::Tensor& buffer = posted.buffer;
  const auto* h = static_cast<const int64_t*>(buffer.data_ptr());
  const int64_t values = h[0], n = h[0] + h[1];
  const bool inline_tensors = h[4] != 0;
  PIPELAB_ASSERT(values >= 0 && h[1] >= 0 && n <= kMaxTensors && (!inline_tensors || h[3] <= buffer.numel()),
                 "a message header of {} + {} tensors and {} bytes", values, h[1], h[3]);
  Message m;
  m.tag = h[2];
  int64_t end = kHeaderBytes;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t* t0 = h + kFixed + i * kPerTensor;
    at::Tensor t;
    if (t0[0] >= 0) {
      PIPELAB_ASSERT(t0[1] >= 0 && t0[1] <= kMaxDims, "a message tensor of {} dimensions", t0[1]);
      const std::vector<int64_t> shape(t0 + 3, t0 + 3 + t0[1]);
      const auto dtype = static_cast<at::ScalarType>(t0[0]);
      if (t0[2] != 0) {
        PIPELAB_ASSERT(route.channel && device.is_cuda(), "a tensor for a device channel that stage {} does not have",
                       route.to);
        t = at::empty(shape, at::TensorOptions().dtype(dtype).device(device));
        route.channel->recv(t);
      } else if (inline_tensors) {
        // A view into the received buffer (which it keeps alive): no copy.
        const int64_t start = aligned(end);
        const int64_t count = c10::multiply_integers(shape);
        end = start + count * static_cast<int64_t>(c10::elementSize(dtype));
        PIPELAB_ASSERT(end <= h[3], "a message tensor past the message's {} bytes", h[3]);
        t = buffer.narrow(0, start, end - start).view(dtype).view(shape);
      } else {
        t = at::empty(shape, at::TensorOptions().dtype(dtype));
        group.recv(t, route.peer, message_tag(route.kind, route.mb, route.to, static_cast<int>(i) + 1));
      }
    }
    (i < values ? m.values : m.extra).push_back(t);
  }
  if (!route.link) sizes.saw(route.from, route.to, route.kind, h[3]);
  return m;
}

}  // namespace pipelab::dist
