#include "datasets/io/idx.h"

#include <ATen/ATen.h>

#include <cstring>

#include "core/model/model.h"
#include "core/util/error.h"
#include "datasets/io/files.h"

namespace pipelab {
namespace {

uint32_t big_endian(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t k = 0; k < 4; ++k) v = (v << 8) | static_cast<unsigned char>(bytes[at + k]);
  return v;
}

void put_big_endian(std::string& out, uint32_t v) {
  for (int k = 3; k >= 0; --k) out.push_back(static_cast<char>((v >> (8 * k)) & 0xFF));
}

}  // namespace

uint32_t idx_ubyte_magic(int dims) { return 0x00000800u | static_cast<uint32_t>(dims); }

at::Tensor parse_idx_ubyte(const std::string& bytes, int dims, const std::string& path) {
  const uint32_t expected = idx_ubyte_magic(dims);
  const std::string what = fmt::format("an idx file of unsigned bytes with {} dimension{} (magic number 0x{:08x})",
                                       dims, dims == 1 ? "" : "s", expected);
  if (bytes.size() < 4) {
    throw UserError(fmt::format("{}: truncated: {} bytes, expected {}; download it again", path, bytes.size(), what));
  }
  const uint32_t magic = big_endian(bytes, 0);
  if (magic != expected) {
    throw UserError(
        fmt::format("{}: wrong magic number 0x{:08x}, expected {}; is it the right file (images vs "
                    "labels) and decompressed correctly?",
                    path, magic, what));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (bytes.size() < header) {
    throw UserError(fmt::format("{}: truncated: {} bytes, shorter than the {}-byte header of {}; download it again",
                                path, bytes.size(), header, what));
  }
  std::vector<int64_t> sizes;
  size_t count = 1;
  for (int d = 0; d < dims; ++d) {
    sizes.push_back(big_endian(bytes, 4 + 4 * static_cast<size_t>(d)));
    count *= static_cast<size_t>(sizes.back());
  }
  const size_t body = bytes.size() - header;
  if (body != count) {
    throw UserError(
        fmt::format("{}: {}: the header gives shape {} ({} bytes of data) but the file holds {} bytes "
                    "after it; download it again",
                    path, body < count ? "truncated" : "wrong size", shape_text(sizes), count, body));
  }
  at::Tensor out = at::empty(sizes, at::kByte);
  if (count) std::memcpy(out.data_ptr<uint8_t>(), bytes.data() + header, count);
  return out;
}

at::Tensor read_idx_ubyte(const std::string& path, int dims) {
  return parse_idx_ubyte(read_maybe_gzip(path), dims, path);
}

std::string encode_idx_ubyte(const at::Tensor& data) {
  PIPELAB_ASSERT(data.scalar_type() == at::kByte, "idx data must be uint8, got {}", c10::toString(data.scalar_type()));
  const at::Tensor c = data.contiguous();
  std::string out;
  put_big_endian(out, idx_ubyte_magic(static_cast<int>(c.dim())));
  for (const int64_t s : c.sizes()) put_big_endian(out, static_cast<uint32_t>(s));
  out.append(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()), static_cast<size_t>(c.numel()));
  return out;
}

}  // namespace pipelab
