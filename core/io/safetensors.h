#pragma once
/// The safetensors format (Hugging Face's weight files), read and written here: an 8-byte
/// little-endian header length N, N bytes of a JSON object {name: {dtype, shape,
/// data_offsets: [begin, end]}, "__metadata__": {string: string}}, then the tensors' bytes,
/// offsets counted from the end of the header.
///
/// Written by hand because no maintained C++ implementation is packaged (Debian has none; the
/// reference library is Rust), and the format is small: the JSON is nlohmann-json's
/// (Debian's nlohmann-json3-dev), the rest is bounds checks. A file is read as the reference
/// library validates it: a header of at most 100,000,000 bytes starting with '{', known
/// dtypes, shapes whose byte size equals their offsets' span, tensors that tile the data
/// buffer from 0 to its end without gaps or overlaps. Every violation is a UserError naming
/// the file and the tensor; tools/fuzz/safetensors_fuzzer.cpp fuzzes the reader.
#include <map>
#include <string>

#include "core/io/pt_file.h"

namespace pipelab {

/// The reference library's limit on the JSON header.
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

/// The bytes of a safetensors file holding `tensors` (CPU copies, contiguous, in the order
/// given) and the string `metadata`. A dtype the format lacks or a repeated name is a
/// UserError.
std::string encode_safetensors(const TensorDict& tensors, const std::map<std::string, std::string>& metadata = {});
/// Writes encode_safetensors(...) to `path` atomically.
void save_safetensors(const std::string& path, const TensorDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// The tensors of a safetensors file's bytes, in the order of their data; `name` stands for
/// the file in messages.
TensorDict decode_safetensors(const std::string& bytes, const std::string& name);
TensorDict load_safetensors(const std::string& path);

/// Whether `path` names a safetensors file (by its extension, as Hugging Face names them).
bool is_safetensors_path(const std::string& path);

/// A state dict from a .pt (torch.save) or a .safetensors file, by the file's extension.
TensorDict load_weights(const std::string& path);

}  // namespace pipelab
