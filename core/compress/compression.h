#pragma once
/// Compressed stage boundaries (docs/compression.md): the experiment's `compression:`
/// section, and the codecs of every stream it names, applied where messages cross (the SEND
/// and RECV actions of exec/actions.cpp, through StageSlot::codecs).
///
///   compression: {activations: {type: sort_quant, q: 6, s: 2}, gradients: {type: cast},
///                 boundaries: all | client_server | [0, 2]}
///
/// Straight-through: the sender keeps its exact output, the receiver computes with x̂, and the
/// gradient the receiver sends back (of x̂) is compressed on its way with its own codec and
/// used as the gradient of the exact output. A message's floating tensors are encoded, each
/// as [meta, parts...], meta an empty tensor of shape [0, x's shape] and x's dtype (zero bytes:
/// it tells the receiver what to rebuild); integer tensors (masks) travel as [meta, x], and
/// undefined ones as [undefined]. Only the parts have bytes, so the traffic figures and the
/// wire count the codes and side information.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/compress/codec.h"
#include "core/config/config_node.h"
#include "core/comm/message.h"
#include "core/schedule/schedule.h"

namespace pipelab {

/// The `compression:` section.
struct CompressionSection {
  std::shared_ptr<Codec> activations, gradients;  ///< null: that direction travels as it is
  enum class Where { All, ClientServer, Listed };
  Where where = Where::All;
  std::vector<int> listed;  ///< boundaries (0: between stages 0 and 1) for Where::Listed
  std::optional<ConfigNode> node;  ///< where the section was read (for later errors)
  bool any() const { return activations || gradients; }
  /// Whether a codec keeps state between micro-batches (top-k's error feedback).
  bool stateful() const { return (activations && activations->stateful()) || (gradients && gradients->stateful()); }
  /// Whether a codec reads each micro-batch's example ids (AQ-SGD).
  bool needs_ids() const { return (activations && activations->needs_ids()) || (gradients && gradients->needs_ids()); }
  /// `{activations: ..., gradients: ..., boundaries: ...}` as resolved (for config.yaml).
  YAML::Node resolved() const;
};

/// Reads the section; every mistake names its key and the fix.
CompressionSection read_compression(const ConfigNode& node);

/// What the codecs of a run are told about it.
struct CodecRun {
  int64_t examples = 0;  ///< training examples (AQ-SGD's per-example history)
  std::string folder;    ///< for state kept on disk: <run.output>/codec_cache
};

class BoundaryCodecs {
 public:
  /// For a pipeline of `stages` positions; `position(stage)` gives a stage's position.
  BoundaryCodecs(const CompressionSection& section, int stages, std::function<int(int)> position, CodecRun run = {});
  /// Checks the listed boundaries against the pipeline (a UserError naming the key).
  void check() const;
  /// Checks that each codec the section gives codes some message of `schedule` (the run's
  /// training schedule, with its messages): a codec that codes nothing (one stage, no
  /// compressed boundary, a scheme that sends no gradient back) is a ConfigError at its key.
  void check_used(const Schedule& schedule) const;
  /// The message stage `from` sends to stage `to` with payload `kind` ('F', 'B', 'H'),
  /// encoded by the sender's end of each of its streams; `m` itself when the boundary is not
  /// compressed. `ids`: the micro-batch's example ids (may be undefined).
  Message encode(int from, int to, char kind, int mb, bool training, Message m, const at::Tensor& ids = {});
  /// What encode() gave, decoded by the receiver's ends.
  Message decode(int from, int to, char kind, int mb, bool training, Message m, const at::Tensor& ids = {});
  /// Whether the boundary between positions p and p+1 is compressed.
  bool compressed(int boundary) const;
  bool needs_ids() const { return section_.needs_ids(); }
  /// Whether the message stage `from` sends to `to` with payload `kind` is coded at all.
  bool codes(int from, int to, char kind) const;
  /// The state of the stream ends stage `stage` holds (the sender's of what it sends, the
  /// receiver's of what it receives), by stream name: what its checkpoint keeps.
  c10::IValue state(int stage);
  /// Restores what state() gave; each stream end takes its part when it is made.
  void load_state(int stage, const c10::IValue& state);
  /// Bytes of state every stream end of this process holds (AQ-SGD's history, error feedback).
  int64_t storage_bytes();

 private:
  using Stream = std::tuple<int, int, char, int, bool>;  // from, to, kind, tensor, receiver end
  static std::string name_of(const Stream& s);
  /// The stage that holds a stream end.
  static int holder(const Stream& s) { return std::get<4>(s) ? std::get<1>(s) : std::get<0>(s); }
  Codec* codec(const Stream& s);
  std::vector<at::Tensor> encode_list(int from, int to, char kind, bool extra, const CodecCall& call,
                                      const std::vector<at::Tensor>& in);
  std::vector<at::Tensor> decode_list(int from, int to, char kind, bool extra, const CodecCall& call,
                                      const std::vector<at::Tensor>& in);

  CompressionSection section_;
  int stages_;
  std::function<int(int)> position_;
  CodecRun run_;
  std::mutex mutex_;  ///< the streams' map (each stream's codec is used by one thread)
  std::map<Stream, std::unique_ptr<Codec>> streams_;
  /// By stream name: the holding stage and its saved state, until the stream end is made.
  std::map<std::string, std::pair<int, c10::IValue>> restored_;
};

}  // namespace pipelab
