#pragma once
/// The restricted unpickler behind load_pt (pt_reader.cpp): the opcodes and globals that
/// torch.save writes for tensors, state dicts and containers of them (pickle protocols 2-5),
/// and nothing else.
///
/// Written by hand because nothing maintained fits: LibTorch's own torch::pickle_load
/// cannot read the OrderedDict-with-_metadata that state_dict() saves (pt_file.h), and
/// Python's pickle is Python. It reads untrusted files, so every input is bounded: each
/// opcode checks the stack and the MARK it needs, lengths are checked against the bytes
/// left, the object count and the tensor bytes have budgets, containers that contain
/// themselves and nesting deeper than kMaxDepth are errors, and objects are torn down
/// without recursion. Fuzzed by tools/fuzz/pt_reader_fuzzer.cpp.
#include <ATen/core/ivalue.h>

#include <functional>
#include <string>

namespace pipelab::io {

/// Deepest container nesting accepted (a state dict needs 2).
inline constexpr int kMaxDepth = 200;

/// What a persistent id ('storage', torch.<X>Storage, key, location, numel) resolves to: a
/// 1-D tensor of `numel` elements of `dtype` holding storage `key`. Throws std::runtime_error
/// with a reason when the storage cannot be provided.
using StorageLoader = std::function<at::Tensor(const std::string& key, at::ScalarType dtype, int64_t numel)>;

/// Unpickles `pickle` into an IValue. `max_tensor_bytes` bounds the bytes of all tensors it
/// rebuilds (views of storages are copied). Throws std::runtime_error with a reason (no file
/// name: the caller adds it) for anything it cannot or will not read.
c10::IValue unpickle(const std::string& pickle, const StorageLoader& storages, int64_t max_tensor_bytes);

}  // namespace pipelab::io
