#include "datasets/io/gzip.h"

#include <fmt/format.h>

#include "core/util/error.h"

#ifdef PIPELAB_HAVE_ZLIB
#include <zlib.h>
#endif

namespace pipelab {

bool looks_gzipped(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

#ifdef PIPELAB_HAVE_ZLIB

bool gzip_supported() { return true; }

std::string gunzip(const std::string& bytes, const std::string& path) {
  if (!looks_gzipped(bytes)) {
    throw UserError(fmt::format("{}: not a gzip file (it does not start with the bytes 1f 8b)", path) +
                    "; give the original .gz file, or the decompressed file without the .gz suffix");
  }
  z_stream z{};
  // 16 + MAX_WBITS: expect a gzip header and trailer (not a raw zlib stream).
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw UserError(fmt::format("{}: zlib failed to start", path));
  std::string out;
  out.resize(std::max<size_t>(bytes.size() * 4, 1 << 16));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  size_t produced = 0;
  int status = Z_OK;
  for (;;) {
    if (produced == out.size()) out.resize(out.size() * 2);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    z.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - produced, 1u << 30));
    const uInt before = z.avail_out;
    status = inflate(&z, Z_NO_FLUSH);
    produced += before - z.avail_out;
    if (status == Z_STREAM_END) {
      // Another gzip member may follow (gzip -c a b > c.gz); gunzip reads them all.
      if (z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b) {
        inflateReset(&z);
        continue;
      }
      break;
    }
    if (status == Z_BUF_ERROR && z.avail_in == 0) break;  // input ended mid-stream
    if (status != Z_OK && status != Z_BUF_ERROR) break;
  }
  const std::string message = z.msg ? z.msg : "";
  inflateEnd(&z);
  if (status != Z_STREAM_END) {
    const bool truncated = status == Z_BUF_ERROR || status == Z_OK;
    throw UserError(fmt::format("{}: {} gzip data{} after {} decompressed bytes; download the file again", path,
                                truncated ? "truncated" : "corrupt", message.empty() ? "" : " (" + message + ")",
                                produced));
  }
  out.resize(produced);
  return out;
}

std::string gzip_compress(const std::string& bytes) {
  z_stream z{};
  PIPELAB_ASSERT(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK,
                 "deflateInit2 failed");
  std::string out(deflateBound(&z, static_cast<uLong>(bytes.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int status = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  PIPELAB_ASSERT(status == Z_STREAM_END, "deflate returned {}", status);
  return out;
}

#else

bool gzip_supported() { return false; }

std::string gunzip(const std::string&, const std::string& path) {
  throw UserError(
      fmt::format("{} is gzip-compressed, but this pipelab was built without zlib; decompress it "
                  "next to the original (`gunzip -k {}`) or install zlib1g-dev and rebuild",
                  path, path));
}

std::string gzip_compress(const std::string&) {
  throw UserError("this pipelab was built without zlib, so it cannot write .gz files; install zlib1g-dev and rebuild");
}

#endif

}  // namespace pipelab
