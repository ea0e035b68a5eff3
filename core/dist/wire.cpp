#include "core/dist/wire.h"

#include <ATen/ATen.h>

#include "core/util/error.h"

namespace pipelab::dist {
namespace {

constexpr int64_t kMaxDims = 8;
constexpr int64_t kPerTensor = 2 + kMaxDims;  // dtype, ndim, sizes
constexpr int64_t kHeader = 3 + 6 * kPerTensor;  // has value, extras, tag; up to 6 tensors
constexpr int kParts = 16;
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
  std::vector<at::Tensor> tensors;
  if (m.value.defined()) tensors.push_back(m.value);
  for (const at::Tensor& t : m.extra) tensors.push_back(t);
  PIPELAB_ASSERT(static_cast<int64_t>(tensors.size()) <= (kHeader - 3) / kPerTensor, "a message of {} tensors", tensors.size());
  at::Tensor header = at::zeros({kHeader}, at::kLong);
  auto h = header.accessor<int64_t, 1>();
  h[0] = m.value.defined();
  h[1] = static_cast<int64_t>(m.extra.size());
  h[2] = m.tag;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    PIPELAB_ASSERT(t.dim() <= kMaxDims, "a {}-dimensional message tensor", t.dim());
    const int64_t at0 = 3 + static_cast<int64_t>(i) * kPerTensor;
    h[at0] = static_cast<int64_t>(t.scalar_type());
    h[at0 + 1] = t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) h[at0 + 2 + d] = t.size(d);
  }
  group.send(header, dst, message_tag(kind, mb, to, 0));
  for (size_t i = 0; i < tensors.size(); ++i) {
    group.send(tensors[i].detach().to(at::kCPU).contiguous(), dst, message_tag(kind, mb, to, static_cast<int>(i) + 1));
  }
}

Message receive_message(ProcessGroup& group, int src, char kind, int mb, int to) {
  at::Tensor header = at::empty({kHeader}, at::kLong);
  group.recv(header, src, message_tag(kind, mb, to, 0));
  auto h = header.accessor<int64_t, 1>();
  const bool has_value = h[0] != 0;
  const int64_t n = (has_value ? 1 : 0) + h[1];
  Message m;
  m.tag = h[2];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at0 = 3 + i * kPerTensor;
    std::vector<int64_t> sizes(h.data() + at0 + 2, h.data() + at0 + 2 + h[at0 + 1]);
    at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(static_cast<at::ScalarType>(h[at0])));
    group.recv(t, src, message_tag(kind, mb, to, static_cast<int>(i) + 1));
    if (i == 0 && has_value) {
      m.value = t;
    } else {
      m.extra.push_back(t);
    }
  }
  return m;
}

}  // namespace pipelab::dist
