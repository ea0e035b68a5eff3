/// libFuzzer target for the safetensors reader (core/io/safetensors.cpp): any input must
/// either read or give a UserError; a crash, a hang, a sanitizer report or any other
/// exception is a finding. A read file must encode back to bytes that read the same (the
/// writer and the reader agree on everything the reader accepts). Built by
/// tools/fuzz/build.sh; seeds from tools/fuzz/make_safetensors_corpus.py.
#include <ATen/ATen.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/io/safetensors.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  pipelab::TensorDict read;
  try {
    read = pipelab::decode_safetensors(input, "fuzz.safetensors");
  } catch (const pipelab::UserError&) {
    return 0;
  }
  const pipelab::TensorDict again =
      pipelab::decode_safetensors(pipelab::encode_safetensors(read), "fuzz.safetensors (written back)");
  if (again.size() != read.size()) std::abort();
  for (size_t i = 0; i < read.size(); ++i) {
    const at::Tensor& a = read[i].second;
    const at::Tensor& b = again[i].second;
    if (read[i].first != again[i].first || a.scalar_type() != b.scalar_type() || !a.sizes().equals(b.sizes())) std::abort();
    // Bytes, not values: NaN payloads and -0 must survive as they are.
    if (a.numel() > 0 && std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) != 0) std::abort();
  }
  return 0;
}
