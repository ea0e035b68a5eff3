#include "core/dist/wire.h"

#include <ATen/ATen.h>

#include <fmt/format.h>

#include "core/util/error.h"

namespace pipelab::dist {
namespace {

constexpr int64_t kMaxDims = 8;
constexpr int64_t kPerTensor = 2 + kMaxDims;  // dtype (-1: undefined), ndim, sizes
constexpr int kParts = 16;
constexpr int64_t kMaxTensors = kParts - 1;  // part 0 is the header
constexpr int64_t kHeader = 3 + kMaxTensors * kPerTensor;  // values, extras, tag; the tensors
constexpr int kStageSlots = 16;  // stages told apart per process pair (interleaved placements)

int kind_index(char kind) {
  switch (kind) {
    case 'F': return 0;
    case 'B': return 1;
    case 'H': return 2;
    default: return 3;
  }
}

}  // namespace

int message_tag(char kind, int mb, int to, int part) {
  PIPELAB_ASSERT(part < kParts && mb >= 0 && mb < (1 << 19) && to >= 0, "message tag out of range (mb {}, part {})", mb, part);
  return ((mb * 4 + kind_index(kind)) * kStageSlots + to % kStageSlots) * kParts + part;
}

void send_message(ProcessGroup& group, const Message& m, int dst, char kind, int mb, int to) {
  std::vector<at::Tensor> tensors = m.values;
  tensors.insert(tensors.end(), m.extra.begin(), m.extra.end());
  if (static_cast<int64_t>(tensors.size()) > kMaxTensors) {
    throw UserError(fmt::format("a message of {} tensors between stages {} and {}: at most {} travel between processes. "
                                "Fix: cut the model where fewer skip connections are in transit.",
                                tensors.size(), kind == 'F' ? to - 1 : to + 1, to, kMaxTensors));
  }
  at::Tensor header = at::zeros({kHeader}, at::kLong);
  auto h = header.accessor<int64_t, 1>();
  h[0] = static_cast<int64_t>(m.values.size());
  h[1] = static_cast<int64_t>(m.extra.size());
  h[2] = m.tag;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    const int64_t at0 = 3 + static_cast<int64_t>(i) * kPerTensor;
    if (!t.defined()) {
      h[at0] = -1;
      continue;
    }
    PIPELAB_ASSERT(t.dim() <= kMaxDims, "a {}-dimensional message tensor", t.dim());
    h[at0] = static_cast<int64_t>(t.scalar_type());
    h[at0 + 1] = t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) h[at0 + 2 + d] = t.size(d);
  }
  group.send(header, dst, message_tag(kind, mb, to, 0));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) continue;
    group.send(tensors[i].detach().to(at::kCPU).contiguous(), dst, message_tag(kind, mb, to, static_cast<int>(i) + 1));
  }
}

Message receive_message(ProcessGroup& group, int src, char kind, int mb, int to) {
  at::Tensor header = at::empty({kHeader}, at::kLong);
  group.recv(header, src, message_tag(kind, mb, to, 0));
  auto h = header.accessor<int64_t, 1>();
  const int64_t values = h[0], n = h[0] + h[1];
  PIPELAB_ASSERT(values >= 0 && h[1] >= 0 && n <= kMaxTensors, "a message header of {} + {} tensors", values, h[1]);
  Message m;
  m.tag = h[2];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at0 = 3 + i * kPerTensor;
    at::Tensor t;
    if (h[at0] >= 0) {
      std::vector<int64_t> sizes(h.data() + at0 + 2, h.data() + at0 + 2 + h[at0 + 1]);
      t = at::empty(sizes, at::TensorOptions().dtype(static_cast<at::ScalarType>(h[at0])));
      group.recv(t, src, message_tag(kind, mb, to, static_cast<int>(i) + 1));
    }
    (i < values ? m.values : m.extra).push_back(t);
  }
  return m;
}

}  // namespace pipelab::dist
