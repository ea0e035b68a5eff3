#include "core/compress/compression.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>

#include "core/schedule/action_kinds.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

constexpr int kExtraStreams = 1000;  // stream numbers of a message's extra tensors start here

/// Meta: an empty tensor of shape [0, shape...] and `t`'s dtype (what to rebuild, no bytes).
at::Tensor meta_of(const at::Tensor& t) {
  std::vector<int64_t> shape{0};
  shape.insert(shape.end(), t.sizes().begin(), t.sizes().end());
  return at::empty(shape, at::TensorOptions().dtype(t.scalar_type()));
}

}  // namespace

CompressionSection read_compression(const ConfigNode& node) {
  node.expect_map("`compression: {activations: CODEC, gradients: CODEC, boundaries: all}`, or `compression: none`");
  CompressionSection c;
  c.node = node;
  for (const std::string& key : node.keys()) {
    if (key != "activations" && key != "gradients" && key != "boundaries") {
      node.child(key).fail(fmt::format("unknown key '{}' in compression", key),
                           "use activations, gradients (each a codec: {type: sort_quant, ...}) and boundaries");
    }
  }
  for (const bool gradient : {false, true}) {
    const char* key = gradient ? "gradients" : "activations";
    if (!node.has(key)) continue;
    std::shared_ptr<Codec> codec = Registry<Codec>::get().create(node.child(key));
    const std::string refused = codec->refuses(gradient);
    if (!refused.empty()) node.child(key).fail(fmt::format("{} cannot code {}", codec->type(), key), refused);
    (gradient ? c.gradients : c.activations) = std::move(codec);
  }
  if (!c.any()) {
    node.fail("a compression section that compresses nothing",
              "give `activations: {type: ...}` and/or `gradients: {type: ...}`, or remove the section");
  }
  if (node.has("boundaries")) {
    const ConfigNode b = node.child("boundaries");
    if (b.yaml().IsScalar() && b.text() == "all") {
      c.where = CompressionSection::Where::All;
    } else if (b.yaml().IsScalar() && b.text() == "client_server") {
      c.where = CompressionSection::Where::ClientServer;
    } else if (b.yaml().IsSequence() && b.yaml().size() > 0) {
      c.where = CompressionSection::Where::Listed;
      for (size_t i = 0; i < b.yaml().size(); ++i) {
        int value = -1;
        try {
          value = b.yaml()[i].as<int>();
        } catch (const YAML::Exception&) {
        }
        if (value < 0) b.fail(fmt::format("'{}' is not a boundary number", YAML::Dump(b.yaml()[i])), "boundary i lies between stages i and i+1: 0, 1, ...");
        c.listed.push_back(value);
      }
    } else {
      b.fail(fmt::format("'{}' is not all, client_server or a list of boundaries", YAML::Dump(b.yaml())),
             "use all, client_server (next to the first and the last stage, gpipe_test's) or [0, 2]");
    }
  }
  return c;
}

YAML::Node CompressionSection::resolved() const {
  YAML::Node n(YAML::NodeType::Map);
  if (activations) n["activations"] = activations->resolved();
  if (gradients) n["gradients"] = gradients->resolved();
  if (where == Where::All) n["boundaries"] = "all";
  if (where == Where::ClientServer) n["boundaries"] = "client_server";
  if (where == Where::Listed) {
    for (int b : listed) n["boundaries"].push_back(b);
  }
  return n;
}

BoundaryCodecs::BoundaryCodecs(const CompressionSection& section, int stages, std::function<int(int)> position,
                               CodecRun run)
    : section_(section), stages_(stages), position_(std::move(position)), run_(std::move(run)) {}

void BoundaryCodecs::check() const {
  for (int b : section_.listed) {
    if (b >= stages_ - 1) {
      section_.node->child("boundaries").fail(
          fmt::format("boundary {} does not exist in a pipeline of {} stages", b, stages_),
          fmt::format("boundaries run from 0 (between stages 0 and 1) to {}", stages_ - 2));
    }
  }
}

void BoundaryCodecs::check_used(const Schedule& schedule) const {
  bool activations = false, gradients = false;
  for (int d = 0; d < schedule.devices(); ++d) {
    for (const Action& a : schedule.device(d)) {
      if (kind_info(a.kind).role != KindRole::Send || !codes(a.stage, peer(a), payload(a.kind))) continue;
      (payload(a.kind) == 'F' ? activations : gradients) = true;
    }
  }
  const char* fix = "remove it: the run would train exactly as without it";
  if (section_.activations && !activations) {
    section_.node->child("activations").fail(
        "no activation crosses a compressed boundary in this run (one stage, or no boundary listed)", fix);
  }
  if (section_.gradients && !gradients) {
    section_.node->child("gradients").fail(
        "no gradient crosses a compressed boundary in this run (one stage, no boundary listed, or a scheme that sends "
        "none back, as dgl)",
        fix);
  }
}

bool BoundaryCodecs::compressed(int boundary) const {
  switch (section_.where) {
    case CompressionSection::Where::All: return true;
    case CompressionSection::Where::ClientServer: return boundary == 0 || boundary == stages_ - 2;
    case CompressionSection::Where::Listed:
      return std::find(section_.listed.begin(), section_.listed.end(), boundary) != section_.listed.end();
  }
  return false;
}

std::string BoundaryCodecs::name_of(const Stream& s) {
  const auto& [from, to, kind, tensor, receiver] = s;
  return fmt::format("{}-{}.{}.t{}.{}", from, to, kind, tensor, receiver ? "recv" : "send");
}

Codec* BoundaryCodecs::codec(const Stream& s) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<Codec>& c = streams_[s];
  if (!c) {
    c = (std::get<2>(s) == 'F' ? section_.activations : section_.gradients)->copy();
    const std::string name = name_of(s);
    c->bind({name, run_.examples, run_.folder});
    const auto it = restored_.find(name);
    if (it != restored_.end()) {
      c->load_state(it->second.second);
      restored_.erase(it);
    }
  }
  return c.get();
}

c10::IValue BoundaryCodecs::state(int stage) {
  std::lock_guard<std::mutex> lock(mutex_);
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [stream, c] : streams_) {
    if (holder(stream) != stage) continue;
    c10::IValue s = c->state();
    if (!s.isNone()) out.insert(name_of(stream), std::move(s));
  }
  // Ends not used since a resume keep what they were given.
  for (const auto& [name, held] : restored_) {
    if (held.first == stage && !out.contains(name)) out.insert(name, held.second);
  }
  return out;
}

void BoundaryCodecs::load_state(int stage, const c10::IValue& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  PIPELAB_ASSERT(state.isGenericDict(), "stage {}'s codec state is not a dict", stage);
  for (const auto& kv : state.toGenericDict()) restored_[kv.key().toStringRef()] = {stage, kv.value()};
}

int64_t BoundaryCodecs::storage_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t n = 0;
  for (const auto& [stream, c] : streams_) n += c->storage_bytes();
  return n;
}

std::vector<at::Tensor> BoundaryCodecs::encode_list(int from, int to, char kind, bool extra, const CodecCall& call,
                                                    const std::vector<at::Tensor>& in) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < in.size(); ++i) {
    const at::Tensor& t = in[i];
    if (!t.defined()) {
      out.emplace_back();
      continue;
    }
    out.push_back(meta_of(t));
    if (!at::isFloatingType(t.scalar_type())) {
      out.push_back(t);
      continue;
    }
    const int stream = static_cast<int>(i) + (extra ? kExtraStreams : 0);
    for (at::Tensor& part : codec({from, to, kind, stream, false})->encode(t.detach().to(at::kCPU), call)) {
      out.push_back(std::move(part));
    }
  }
  return out;
}

std::vector<at::Tensor> BoundaryCodecs::decode_list(int from, int to, char kind, bool extra, const CodecCall& call,
                                                    const std::vector<at::Tensor>& in) {
  std::vector<at::Tensor> out;
  for (size_t k = 0; k < in.size();) {
    const at::Tensor& meta = in[k++];
    if (!meta.defined()) {
      out.emplace_back();
      continue;
    }
    PIPELAB_ASSERT(meta.dim() >= 1 && meta.size(0) == 0, "a compressed message without its meta tensor");
    const std::vector<int64_t> shape(meta.sizes().begin() + 1, meta.sizes().end());
    if (!at::isFloatingType(meta.scalar_type())) {
      PIPELAB_ASSERT(k < in.size(), "a compressed message ends early");
      out.push_back(in[k++]);
      continue;
    }
    const int stream = static_cast<int>(out.size()) + (extra ? kExtraStreams : 0);
    Codec* c = codec({from, to, kind, stream, true});
    PIPELAB_ASSERT(k + static_cast<size_t>(c->parts()) <= in.size(), "a compressed message ends early");
    const std::vector<at::Tensor> parts(in.begin() + static_cast<int64_t>(k), in.begin() + static_cast<int64_t>(k) + c->parts());
    k += static_cast<size_t>(c->parts());
    out.push_back(c->decode(parts, shape, meta.scalar_type(), call));
  }
  return out;
}

bool BoundaryCodecs::codes(int from, int to, char kind) const {
  const bool gradient = kind != 'F';
  return compressed(std::min(position_(from), position_(to))) && (gradient ? section_.gradients : section_.activations);
}

Message BoundaryCodecs::encode(int from, int to, char kind, int mb, bool training, Message m, const at::Tensor& ids) {
  const int boundary = std::min(position_(from), position_(to));
  const bool gradient = kind != 'F';
  if (!compressed(boundary) || !(gradient ? section_.gradients : section_.activations)) return m;
  const CodecCall call{boundary, gradient, mb, training, ids};
  m.values = encode_list(from, to, kind, false, call, m.values);
  m.extra = encode_list(from, to, kind, true, call, m.extra);
  return m;
}

Message BoundaryCodecs::decode(int from, int to, char kind, int mb, bool training, Message m, const at::Tensor& ids) {
  const int boundary = std::min(position_(from), position_(to));
  const bool gradient = kind != 'F';
  if (!compressed(boundary) || !(gradient ? section_.gradients : section_.activations)) return m;
  const CodecCall call{boundary, gradient, mb, training, ids};
  m.values = decode_list(from, to, kind, false, call, m.values);
  m.extra = decode_list(from, to, kind, true, call, m.extra);
  return m;
}

}  // namespace pipelab
