#pragma once
/// LeCun's idx format (MNIST, Fashion-MNIST): a big-endian magic number 0x000008NN (unsigned
/// bytes, NN dimensions), NN big-endian 32-bit sizes, then the bytes in row-major order.
#include <ATen/Tensor.h>

#include <string>

namespace pipelab {

/// The magic number of an idx file of unsigned bytes with `dims` dimensions (0x00000803
/// for images [N, rows, cols], 0x00000801 for labels [N]).
uint32_t idx_ubyte_magic(int dims);

/// Parses idx `bytes` (already decompressed) read from `path` into a uint8 tensor with
/// `dims` dimensions. A wrong magic number, a truncated header or body, or trailing bytes
/// are UserErrors naming `path`, what was found and what was expected.
at::Tensor parse_idx_ubyte(const std::string& bytes, int dims, const std::string& path);

/// Reads an idx file, plain or gzip-compressed.
at::Tensor read_idx_ubyte(const std::string& path, int dims);

/// The idx encoding of a uint8 tensor (for tests and for writing small datasets).
std::string encode_idx_ubyte(const at::Tensor& data);

}  // namespace pipelab
