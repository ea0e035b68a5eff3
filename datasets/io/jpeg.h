#pragma once
/// JPEG decoding (and encoding, for tests) with libjpeg-turbo, an optional dependency: a
/// build without it loads every other dataset and says how to get JPEG support.
#include <ATen/Tensor.h>

#include <string>

namespace pipelab {

/// True when pipelab was built with libjpeg(-turbo).
bool jpeg_supported();

/// Decodes JPEG `bytes` read from `path` into uint8 RGB [3, H, W] (grayscale images are
/// expanded to three equal channels, as PIL's convert('RGB') does). A corrupt or truncated
/// file is a UserError naming `path`.
at::Tensor decode_jpeg(const std::string& bytes, const std::string& path);

/// Encodes uint8 [3, H, W] (RGB) or [1, H, W] (grayscale) as a baseline JPEG.
std::string encode_jpeg(const at::Tensor& image, int quality = 95);

}  // namespace pipelab
