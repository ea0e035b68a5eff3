/// AQ-SGD (Wang et al., "Fine-tuning Language Models over Slow Networks using Activation
/// Compression with Guarantees", NeurIPS'22; docs/compression.md "Codecs"; DS3Lab/AC-SGD's
/// `DeltaCompressor`): both ends of a boundary keep m̂(ξ), the last activation of every
/// training example ξ, and a message is the change against it, quantized (by `fixpoint`, compress/
/// fixpoint.h):
///   sender:   δ = x(ξ) - m̂(ξ); send Q(δ); m̂(ξ) <- cache(m̂(ξ) + Q(δ))
///   receiver: x̂(ξ) = m̂(ξ) + Q(δ);         m̂(ξ) <- cache(x̂(ξ))
/// so the two copies stay bitwise equal. Before an example has been seen `warmup_epochs` times
/// (AC-SGD's `--warmup-epochs`, default 1) its micro-batch travels exactly and both ends store
/// cache(x): the warm-up epoch is plain training. AC-SGD counts epochs; pipelab counts each
/// example's visits, which is the same where every epoch visits every example, and sends a
/// micro-batch exactly while any of its examples lacks a history (one the last partial batch
/// dropped in an earlier epoch), where AC-SGD would take the change against a zero cache.
///
/// Decisions (docs/compression.md; AQ-SGD's quirks in docs/schemes.md, "Quirks"): the receiver
/// computes with the value it stores, fp16 by default (`reference_receiver: true` uses the
/// unrounded x̂ as AC-SGD does); the store is sized from the training set; a micro-batch
/// shares its scales.
/// Evaluation sends activations exactly: the history is of training examples.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/compress/codec.h"
#include "core/compress/fixpoint.h"
#include "core/util/error.h"
#include "core/util/error_text.h"

namespace pipelab {
namespace {

/// A failure to make AQ-SGD's history file: the path's problem is the user's to fix (exit 2),
/// a full disk the machine's (a WriteError: `--resume` continues).
[[noreturn]] void history_failed(const std::string& path, int error) {
  const std::error_code code(error, std::generic_category());
  const std::string text = "AQ-SGD's history (compression: {storage: disk}) cannot be made: " + filesystem_message(path, code);
  if (filesystem_error_is_users(std::filesystem::filesystem_error("", code))) throw UserError(text);
  throw WriteError(text + " (or use storage: memory)");
}

/// Creates `folder`/`name` with `bytes` of disk reserved (posix_fallocate), so that a full
/// disk is an error here, naming the file, rather than a SIGBUS when a page of the mapping is
/// first written.
std::string reserve_file(const std::string& folder, const std::string& name, int64_t bytes) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) history_failed(folder, ec.value());
  const std::string path = (std::filesystem::path(folder) / name).string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) history_failed(path, errno);
  const int err = bytes > 0 ? ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) : 0;
  ::close(fd);
  if (err != 0) {
    ::unlink(path.c_str());
    history_failed(path, err);
  }
  return path;
}

struct AqSgdOptions {
  enum class Cache { Fp16, Full };
  enum class Storage { Memory, Disk };
  compress::FixpointOptions quantizer{4, compress::ScaleDims::Last};
  int warmup_epochs = 1;
  Cache cache = Cache::Fp16;
  Storage storage = Storage::Memory;
  bool reference_receiver = false;
  template <class V>
  void fields(V& v) {
    quantizer.fields(v);
    v("warmup_epochs", warmup_epochs, "visits of an example that travel exactly and fill its history (AC-SGD: 1)",
      in_range(0, 1000000));
    v.choice("cache", cache, Choices<Cache>{{"fp16", Cache::Fp16}, {"full", Cache::Full}},
             "the stored activations' type: fp16 (AC-SGD's) or the run's own dtype");
    v.choice("storage", storage, Choices<Storage>{{"memory", Storage::Memory}, {"disk", Storage::Disk}},
             "where the history lives: memory, or a file per stream end under the run's codec_cache/ (mapped)");
    v("reference_receiver", reference_receiver,
      "fidelity flag: the receiver computes with the unrounded m̂ + Q(δ) and stores its fp16 rounding, as "
      "AC-SGD does; off: it computes with what it stores");
  }
};

class AqSgd : public CodecWith<AqSgd, AqSgdOptions> {
 public:
  using CodecWith::CodecWith;
  int parts() const override { return 2; }
  bool stateful() const override { return true; }
  bool needs_ids() const override { return true; }
  std::string refuses(bool gradient) const override {
    return gradient ? "aq_sgd keeps a history of activations; AC-SGD quantizes gradients directly: use {type: "
                      "fixpoint, bits: 8}"
                    : "";
  }
  void bind(const CodecStream& stream) override { stream_ = stream; }
  int64_t storage_bytes() const override {
    return store_.defined() ? static_cast<int64_t>(store_.nbytes() + visits_.nbytes()) : 0;
  }
  c10::IValue state() const override {
    if (!store_.defined()) return {};
    return c10::ivalue::Tuple::create({store_, visits_});
  }
  void load_state(const c10::IValue& s) override {
    if (s.isNone()) return;
    const auto& saved = s.toTupleRef().elements();
    const at::Tensor store = saved.at(0).toTensor();
    allocate(store.size(0), store.size(1), store.scalar_type());
    store_.copy_(store);
    visits_.copy_(saved.at(1).toTensor());
  }

  std::vector<at::Tensor> encode(const at::Tensor& x0, const CodecCall& call) override {
    const at::Tensor x = x0.detach().contiguous();
    if (!call.training) return exact(x);
    const at::Tensor ids = checked_ids(x, call);
    const at::Tensor flat = x.reshape({x.size(0), -1});
    if (!warm(ids)) {
      store_.index_copy_(0, ids, flat.to(store_.scalar_type()));
      visit(ids);
      return exact(x);
    }
    const at::Tensor before = store_.index_select(0, ids).to(x.scalar_type()).reshape(x.sizes());
    std::vector<at::Tensor> parts = compress::fixpoint_encode(x - before, options_.quantizer);
    const at::Tensor sent = compress::fixpoint_decode(parts, x.sizes(), x.scalar_type(), options_.quantizer);
    store_.index_copy_(0, ids, (before + sent).reshape(flat.sizes()).to(store_.scalar_type()));
    visit(ids);
    return parts;
  }

  at::Tensor decode(const std::vector<at::Tensor>& parts, at::IntArrayRef shape, at::ScalarType dtype,
                    const CodecCall& call) override {
    const bool is_exact = at::isFloatingType(parts.at(0).scalar_type());
    at::Tensor x = is_exact ? parts.at(0).to(dtype).reshape(shape) : at::Tensor();
    if (!call.training) {
      PIPELAB_ASSERT(is_exact, "aq_sgd: a compressed message in evaluation");
      return x;
    }
    const at::Tensor ids = checked_ids(at::empty(shape, at::TensorOptions().dtype(dtype)), call);
    if (is_exact) {
      store_.index_copy_(0, ids, x.reshape({shape[0], -1}).to(store_.scalar_type()));
      visit(ids);
      return x;
    }
    const at::Tensor before = store_.index_select(0, ids).to(dtype).reshape(shape);
    const at::Tensor unrounded = before + compress::fixpoint_decode(parts, shape, dtype, options_.quantizer);
    const at::Tensor stored = unrounded.reshape({shape[0], -1}).to(store_.scalar_type());
    store_.index_copy_(0, ids, stored);
    visit(ids);
    return options_.reference_receiver ? unrounded : stored.to(dtype).reshape(shape);
  }

 private:
  /// [x, an empty tensor]: an exact message (its first part floating, so decode tells).
  static std::vector<at::Tensor> exact(const at::Tensor& x) { return {x, at::empty({0}, at::kHalf)}; }

  /// The micro-batch's example ids, checked against the tensor and the store (made on first use).
  at::Tensor checked_ids(const at::Tensor& x, const CodecCall& call) {
    TORCH_CHECK(call.ids.defined(), "aq_sgd needs each micro-batch's example ids, which this run's feed does not give");
    TORCH_CHECK(x.dim() >= 1 && x.size(0) == call.ids.numel(), "aq_sgd: a boundary tensor of shape ", x.sizes(),
                " for ", call.ids.numel(), " examples (the examples must run along dimension 0)");
    const at::Tensor ids = call.ids.to(at::kLong).reshape({-1});
    // The store is sized from the training set (docs/schemes.md, "Quirks"), and an id beyond it is an error.
    TORCH_CHECK(ids.numel() == 0 || (ids.min().item<int64_t>() >= 0 && ids.max().item<int64_t>() < stream_.examples),
                "aq_sgd: example ids outside the training set of ", stream_.examples);
    const int64_t per = x.size(0) ? x.numel() / x.size(0) : 0;
    const at::ScalarType type = options_.cache == AqSgdOptions::Cache::Fp16 ? at::kHalf : x.scalar_type();
    if (!store_.defined()) allocate(stream_.examples, per, type);
    TORCH_CHECK(store_.size(1) == per, "aq_sgd: an example of ", per, " elements where the history holds ",
                store_.size(1));
    return ids;
  }

  void allocate(int64_t examples, int64_t per, at::ScalarType type) {
    visits_ = at::zeros({examples}, at::kInt);
    if (options_.storage == AqSgdOptions::Storage::Memory) {
      store_ = at::zeros({examples, per}, at::TensorOptions().dtype(type));
      return;
    }
    // A file mapped shared (LibTorch's MapAllocator): the history costs disk, not memory.
    const std::string path = reserve_file(stream_.folder, stream_.name + ".bin",
                                          examples * per * static_cast<int64_t>(c10::elementSize(type)));
    store_ = at::from_file(path, true, examples * per, at::TensorOptions().dtype(type)).view({examples, per});
  }

  bool warm(const at::Tensor& ids) const {
    return options_.warmup_epochs == 0 || visits_.index_select(0, ids).min().item<int>() >= options_.warmup_epochs;
  }
  void visit(const at::Tensor& ids) { visits_.index_add_(0, ids, at::ones({ids.numel()}, at::kInt)); }

  CodecStream stream_;
  at::Tensor store_;   ///< [examples, elements per example]: m̂
  at::Tensor visits_;  ///< [examples]: training messages that carried each example
};

}  // namespace

PIPELAB_REGISTER(Codec, AqSgd, "aq_sgd",
                 "AQ-SGD: the change of each example's activation against its stored previous one, quantized "
                 "(activations only)");

}  // namespace pipelab
