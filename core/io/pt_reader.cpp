/// Reads torch.save's format: the zip container via LibTorch's PyTorchStreamReader, and the
/// pickle in data.pkl with pipelab's restricted unpickler (unpickler.h). Every failure is a
/// UserError that names the file and says it is not a state dict pipelab can read.
#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include "core/io/input_file.h"
#include "core/io/pt_file.h"
#include "core/io/unpickler.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

constexpr const char* kFix =
    "Fix: give a file written by torch.save of tensors, or of dicts/lists of tensors and numbers "
    "(e.g. torch.save(model.state_dict(), path)), or by pipelab.";

[[noreturn]] void unreadable(const std::string& name, const std::string& why) {
  throw UserError(fmt::format("{}: not a state dict pipelab can read: {}. {}", name, why, kFix));
}

/// One record of the archive, with c10's errors (bad CRC, cut-off entry) turned into ours.
std::tuple<at::DataPtr, size_t> record(caffe2::serialize::PyTorchStreamReader& reader, const std::string& name) {
  try {
    return reader.getRecord(name);
  } catch (const c10::Error& e) {
    throw std::runtime_error(fmt::format("its zip record {} is damaged ({})", name, e.what_without_backtrace()));
  }
}

c10::IValue decode(caffe2::serialize::PyTorchStreamReader& reader, const std::string& name) {
  if (reader.hasRecord("byteorder")) {
    auto [p, n] = record(reader, "byteorder");
    if (std::string(static_cast<const char*>(p.get()), n) != "little") {
      throw std::runtime_error("it is big-endian, which is not supported");
    }
  }
  if (!reader.hasRecord("data.pkl")) {
    throw std::runtime_error("the archive has no data.pkl (a TorchScript module?)");
  }
  auto [ptr, size] = record(reader, "data.pkl");
  const std::string pickle(static_cast<const char*>(ptr.get()), size);
  // Tensors are rebuilt from storages; their bytes can exceed the storages' only through
  // repeated views, so twice the archive's storage bytes (plus slack) bounds honest files.
  int64_t storage_bytes = 0;
  for (const std::string& r : reader.getAllRecords()) {
    if (r.rfind("data/", 0) == 0) storage_bytes += static_cast<int64_t>(reader.getRecordSize(r));
  }
  const io::StorageLoader load = [&](const std::string& key, at::ScalarType dtype, int64_t numel) {
    const std::string r = "data/" + key;
    if (key.empty() || key.find('/') != std::string::npos || !reader.hasRecord(r)) {
      throw std::runtime_error("storage record " + r + " is missing");
    }
    const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
    const size_t declared = reader.getRecordSize(r);
    if (numel > std::numeric_limits<int64_t>::max() / element || static_cast<size_t>(numel * element) != declared) {
      throw std::runtime_error(fmt::format("storage {} has {} bytes, but its tensor header says {} elements of {} bytes",
                                           key, declared, numel, element));
    }
    auto [data, n] = record(reader, r);
    at::Tensor t = at::empty({numel}, at::TensorOptions().dtype(dtype));
    if (n) std::memcpy(t.data_ptr(), data.get(), n);
    return t;
  };
  return io::unpickle(pickle, load, 2 * storage_bytes + (int64_t{64} << 20));
}

c10::IValue decode_named(std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader, const std::string& name) {
  try {
    return decode(*reader, name);
  } catch (const UserError&) {
    throw;
  } catch (const c10::Error& e) {
    unreadable(name, e.what_without_backtrace());
  } catch (const std::exception& e) {
    unreadable(name, e.what());
  }
}

}  // namespace

c10::IValue load_pt(const std::string& path) {
  check_input_file(path);  // a folder, a FIFO, a missing file: a clear error before LibTorch opens it
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  } catch (const c10::Error&) {
    throw UserError(fmt::format(
        "{}: not a PyTorch .pt file in the zip format. Fix: save it with torch.save(obj, path) from "
        "PyTorch >= 1.6 (not with _use_new_zipfile_serialization=False, pickle or numpy).",
        path));
  }
  return decode_named(std::move(reader), path);
}

c10::IValue decode_pt(const std::string& bytes, const std::string& name) {
  auto in = std::make_shared<std::istringstream>(bytes);
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(in.get());
  } catch (const c10::Error&) {
    unreadable(name, "it is not a zip archive");
  }
  return decode_named(std::move(reader), name);
}

TensorDict to_tensor_dict(const c10::IValue& value, const std::string& what) {
  if (!value.isGenericDict()) {
    throw UserError(fmt::format("{}: expected a dict of name -> tensor, got {}. Fix: save e.g. "
                                "torch.save(model.state_dict(), path).",
                                what, value.tagKind()));
  }
  TensorDict out;
  for (const auto& kv : value.toGenericDict()) {
    if (!kv.key().isString() || !kv.value().isTensor()) {
      throw UserError(fmt::format("{}: expected a dict of name -> tensor, but an entry is {} -> {}.", what,
                                  kv.key().tagKind(), kv.value().tagKind()));
    }
    out.emplace_back(kv.key().toStringRef(), kv.value().toTensor());
  }
  return out;
}

TensorDict load_tensor_dict(const std::string& path) { return to_tensor_dict(load_pt(path), path); }

}  // namespace pipelab
