#pragma once
/// PyTorch's .pt format, read and written by pipelab itself: torch.save's zip container
/// (LibTorch's PyTorchStreamReader/Writer) around a protocol-2 pickle.
///
/// Why not torch::pickle_save/pickle_load: the former tags typed containers with
/// torch.jit._pickle.restore_type_tag, which Python's torch.load(weights_only=True) rejects,
/// and the latter cannot read the OrderedDict (with _metadata) that state_dict() saves.
/// The writer emits only globals on torch.load's weights-only allow list; the reader
/// understands what torch.save writes for state dicts and dicts/lists/tuples of tensors
/// and scalars.
#include <ATen/core/ivalue.h>

#include <string>
#include <utility>
#include <vector>

namespace pipelab {

/// Writes `value` (None, bool, int, double, string, tensor, or lists/tuples/dicts of them)
/// to `path` atomically. Tensors are saved from CPU copies.
void save_pt(const std::string& path, const c10::IValue& value);
/// The bytes save_pt would write.
std::string encode_pt(const c10::IValue& value);

/// Reads a .pt file written by Python's torch.save or by save_pt. Tensors come back on
/// the CPU, contiguous. Errors (missing file, not a zip, unsupported object) are
/// UserErrors that name the file.
c10::IValue load_pt(const std::string& path);
/// load_pt of the bytes of a .pt file; `name` stands for the file in messages.
c10::IValue decode_pt(const std::string& bytes, const std::string& name);

/// Name -> tensor, in order (a state dict).
using TensorDict = std::vector<std::pair<std::string, at::Tensor>>;

/// Saves a state dict (a dict of name -> tensor).
void save_tensor_dict(const std::string& path, const TensorDict& tensors);
/// Loads a dict of name -> tensor; anything else is a UserError naming the file.
TensorDict load_tensor_dict(const std::string& path);

/// Converts between TensorDict and a generic dict IValue (for nesting in checkpoints).
c10::IValue to_ivalue(const TensorDict& tensors);
TensorDict to_tensor_dict(const c10::IValue& value, const std::string& what);

}  // namespace pipelab
