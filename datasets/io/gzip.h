#pragma once
/// gzip decompression through zlib, an optional dependency: a build without zlib reads
/// plain files and says how to decompress a .gz one by hand.
#include <string>

namespace pipelab {

/// True when pipelab was built with zlib.
bool gzip_supported();

/// True when `bytes` start with the gzip magic number (1f 8b).
bool looks_gzipped(const std::string& bytes);

/// The decompressed contents of the gzip data `bytes` read from `path` (named in errors).
/// Concatenated gzip members are read one after the other, as gunzip does. A corrupt or
/// truncated stream, or a build without zlib, is a UserError naming `path`.
std::string gunzip(const std::string& bytes, const std::string& path);

/// `bytes` as one gzip member (for tests and for writing small datasets). Needs zlib.
std::string gzip_compress(const std::string& bytes);

}  // namespace pipelab
