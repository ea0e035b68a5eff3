#include "datasets/io/jpeg.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cstdio>
#include <vector>

#include "core/model/model.h"
#include "core/util/error.h"

#ifdef PIPELAB_HAVE_JPEG
#include <csetjmp>

#include <jpeglib.h>
// jerror.h after jpeglib.h: it names the warning codes (JWRN_JPEG_EOF).
#include <jerror.h>
#endif

namespace pipelab {

#ifdef PIPELAB_HAVE_JPEG
namespace {

// libjpeg reports fatal errors through error_exit, which must not return. It is C code, so
// no C++ exception may cross it: the handler longjmps back to the decoding function,
// whose frame holds only plain C objects between setjmp and the jump.
struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_error(j_common_ptr info) {
  auto* e = reinterpret_cast<ErrorManager*>(info->err);
  (*info->err->format_message)(info, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings are silent, except a premature end of data: libjpeg would pad the missing rows
// with grey and carry on, which would train on a damaged image without a word.
void on_message(j_common_ptr info, int level) {
  if (level < 0 && info->err->msg_code == JWRN_JPEG_EOF) on_error(info);
}

jpeg_error_mgr* errors(ErrorManager& err) {
  jpeg_std_error(&err.pub);
  err.pub.error_exit = on_error;
  err.pub.emit_message = on_message;
  err.message[0] = '\0';
  return &err.pub;
}

struct Decoded {
  std::vector<unsigned char> pixels;  // H x W x 3, interleaved
  int height = 0, width = 0;
};

/// (a * b) / 255, rounded as Pillow's MULDIV255 rounds it.
int muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

/// One row of CMYK as RGB, as Pillow's convert('RGB') gives it: R = (255 - C)(255 - K) / 255.
/// Files with Adobe's marker (Photoshop's, and every CMYK file libjpeg writes) store the
/// channels inverted, which Pillow reads as its "CMYK;I" mode.
void cmyk_to_rgb(const unsigned char* in, unsigned char* out, size_t width, bool inverted) {
  for (size_t x = 0; x < width; ++x) {
    const unsigned char* p = in + 4 * x;
    const int k = inverted ? 255 - p[3] : p[3];
    const int nk = 255 - k;
    for (int c = 0; c < 3; ++c) {
      const int v = inverted ? 255 - p[c] : p[c];
      out[3 * x + static_cast<size_t>(c)] = static_cast<unsigned char>(nk - muldiv255(v, nk));
    }
  }
}

enum class Outcome { Decoded, Unreadable, TooLarge };

/// Decodes into `out`, or sets `message`: the file is not a readable JPEG, or is larger than
/// `max_pixels` (read from the header, before anything is allocated for it).
Outcome decode_into(const unsigned char* data, size_t size, Decoded* out, char* message, double max_pixels) {
  jpeg_decompress_struct info{};
  ErrorManager err;
  info.err = errors(err);
  if (setjmp(err.jump)) {
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", err.message);
    jpeg_destroy_decompress(&info);
    return Outcome::Unreadable;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  const double pixels = static_cast<double>(info.image_width) * static_cast<double>(info.image_height);
  if (pixels > max_pixels) {
    std::snprintf(message, JMSG_LENGTH_MAX, "its header says %ux%u: %.3g pixels, more than the %.0f an image may have",
                  info.image_width, info.image_height, pixels, max_pixels);
    jpeg_destroy_decompress(&info);
    return Outcome::TooLarge;
  }
  // libjpeg converts YCCK to CMYK but neither to RGB: that conversion is done here.
  const bool cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
  info.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&info);
  out->height = static_cast<int>(info.output_height);
  out->width = static_cast<int>(info.output_width);
  const size_t width = static_cast<size_t>(out->width), stride = width * 3;
  out->pixels.resize(stride * static_cast<size_t>(out->height));
  std::vector<unsigned char> four(cmyk ? width * 4 : 0);
  while (info.output_scanline < info.output_height) {
    unsigned char* target = out->pixels.data() + stride * info.output_scanline;
    JSAMPROW row = cmyk ? four.data() : target;
    jpeg_read_scanlines(&info, &row, 1);
    if (cmyk) cmyk_to_rgb(four.data(), target, width, info.saw_Adobe_marker != 0);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return Outcome::Decoded;
}

bool encode_into(const unsigned char* pixels, int height, int width, int channels, int quality, unsigned char** buffer,
                 unsigned long* size, char* message) {
  jpeg_compress_struct info{};
  ErrorManager err;
  info.err = errors(err);
  if (setjmp(err.jump)) {
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", err.message);
    jpeg_destroy_compress(&info);
    return false;
  }
  jpeg_create_compress(&info);
  jpeg_mem_dest(&info, buffer, size);
  info.image_width = static_cast<JDIMENSION>(width);
  info.image_height = static_cast<JDIMENSION>(height);
  info.input_components = channels;
  info.in_color_space = channels == 4 ? JCS_CMYK : channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  const size_t stride = static_cast<size_t>(width) * static_cast<size_t>(channels);
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<unsigned char*>(pixels) + stride * info.next_scanline;
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  return true;
}

}  // namespace

bool jpeg_supported() { return true; }

at::Tensor decode_jpeg(const std::string& bytes, const std::string& path) {
  Decoded decoded;
  char message[JMSG_LENGTH_MAX];
  const Outcome outcome = decode_into(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), &decoded,
                                      message, static_cast<double>(kMaxImagePixels));
  if (outcome == Outcome::TooLarge) {
    throw UserError(fmt::format("{}: an image too large to decode ({}). Fix: resize it, or leave it out", path, message));
  }
  if (outcome == Outcome::Unreadable) {
    throw UserError(
        fmt::format("{}: not a readable JPEG image ({}). Fix: replace the file with a good copy", path, message));
  }
  const at::Tensor hwc = at::from_blob(decoded.pixels.data(), {decoded.height, decoded.width, 3}, at::kByte);
  return hwc.permute({2, 0, 1}).contiguous();
}

std::string encode_jpeg(const at::Tensor& image, int quality) {
  PIPELAB_ASSERT(image.dim() == 3 && image.scalar_type() == at::kByte &&
                     (image.size(0) == 4 || image.size(0) == 3 || image.size(0) == 1),
                 "encode_jpeg needs uint8 [4, 3 or 1, H, W], got {} {}", c10::toString(image.scalar_type()),
                 shape_text(image.sizes()));
  const at::Tensor hwc = image.permute({1, 2, 0}).contiguous();
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  char message[JMSG_LENGTH_MAX];
  const bool ok = encode_into(hwc.data_ptr<uint8_t>(), static_cast<int>(image.size(1)), static_cast<int>(image.size(2)),
                              static_cast<int>(image.size(0)), quality, &buffer, &size, message);
  std::string out = ok ? std::string(reinterpret_cast<char*>(buffer), size) : std::string();
  std::free(buffer);
  PIPELAB_ASSERT(ok, "JPEG encoding failed: {}", message);
  return out;
}

#else

bool jpeg_supported() { return false; }

at::Tensor decode_jpeg(const std::string&, const std::string& path) {
  throw UserError(
      fmt::format("cannot read {}: this pipelab was built without libjpeg; install libjpeg62-turbo-dev "
                  "and rebuild (tools/setup.sh does both)",
                  path));
}

std::string encode_jpeg(const at::Tensor&, int) {
  throw UserError(
      "this pipelab was built without libjpeg, so it cannot write JPEG files; install "
      "libjpeg62-turbo-dev and rebuild");
}

#endif

}  // namespace pipelab
