/// libFuzzer target for the .pt reader (core/io/pt_reader.cpp, core/io/unpickler.cpp): any
/// input must either read or give a UserError; a crash, a hang, a sanitizer report or any
/// other exception is a finding. An input that starts like a zip ("PK\3\4") is read as a
/// whole file (LibTorch's zip reader, then ours); anything else is taken as the pickle of
/// a torch.save archive that also holds storages "0" (64 bytes) and "1" (16 bytes), so
/// the fuzzer spends its time in the unpickler. Built by tools/fuzz/build.sh.
#include <caffe2/serialize/inline_container.h>

#include <cstdint>
#include <string>

#include "core/io/pt_file.h"
#include "core/util/error.h"

namespace {

std::string wrap(const std::string& pickle) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return n;
  });
  const std::string s0(64, '\x01'), s1(16, '\x02');
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeRecord("byteorder", "little", 6);
  writer.writeRecord("data/0", s0.data(), s0.size());
  writer.writeRecord("data/1", s1.data(), s1.size());
  writer.writeEndOfFile();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  if (input.rfind("PK\x03\x04", 0) != 0) input = wrap(input);
  try {
    pipelab::decode_pt(input, "fuzz.pt");
  } catch (const pipelab::UserError&) {
  }
  return 0;
}
