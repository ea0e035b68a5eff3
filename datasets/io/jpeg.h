#pragma once
/// JPEG decoding (and encoding, for tests) with libjpeg-turbo, an optional dependency: a
/// build without it loads every other dataset and says how to get JPEG support.
#include <ATen/Tensor.h>

#include <cstdint>
#include <string>

namespace pipelab {

/// True when pipelab was built with libjpeg(-turbo).
bool jpeg_supported();

/// The most pixels an image may have: Pillow's decompression-bomb limit (twice its
/// MAX_IMAGE_PIXELS), checked against the header before any pixel is decoded, so a small file
/// that claims 65000x65000 is refused instead of allocating 12 GB.
inline constexpr int64_t kMaxImagePixels = 2 * 89478485;

/// Decodes JPEG `bytes` read from `path` into uint8 RGB [3, H, W] (grayscale images are
/// expanded to three equal channels, and CMYK/YCCK ones converted, as Pillow's
/// convert('RGB') does). A corrupt, truncated or over-large file is a UserError naming `path`.
at::Tensor decode_jpeg(const std::string& bytes, const std::string& path);

/// Encodes uint8 [3, H, W] (RGB), [1, H, W] (grayscale) or [4, H, W] (CMYK, stored as
/// libjpeg stores it: as given, with Adobe's marker) as a baseline JPEG.
std::string encode_jpeg(const at::Tensor& image, int quality = 95);

}  // namespace pipelab
