/// Writes torch.save's format: a zip (PyTorchStreamWriter: 64-byte aligned records,
/// version record) holding data.pkl (a protocol-2 pickle) and one record per storage
/// under data/. Only globals on torch.load's weights-only allow list are emitted.
#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>

#include <cstring>

#include "core/io/atomic_file.h"
#include "core/io/pt_file.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

/// Python's legacy storage class for a dtype (what torch.save names in its pickles).
const char* storage_class(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "FloatStorage";
    case at::kDouble: return "DoubleStorage";
    case at::kHalf: return "HalfStorage";
    case at::kBFloat16: return "BFloat16Storage";
    case at::kLong: return "LongStorage";
    case at::kInt: return "IntStorage";
    case at::kShort: return "ShortStorage";
    case at::kChar: return "CharStorage";
    case at::kByte: return "ByteStorage";
    case at::kBool: return "BoolStorage";
    case at::kComplexFloat: return "ComplexFloatStorage";
    case at::kComplexDouble: return "ComplexDoubleStorage";
    default: throw UserError(fmt::format("cannot save tensors of dtype {} to .pt", c10::toString(t)));
  }
}

class Pickler {
 public:
  std::string bytes;
  std::vector<at::Tensor> storages;  // contiguous CPU tensors, record data/<index>

  void op(char c) { bytes.push_back(c); }
  void raw(const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); }
  void u32(uint32_t v) { raw(&v, 4); }  // little-endian host (checked by the caller)

  void global(const char* module, const char* name) {
    op('c');
    bytes += module;
    bytes += '\n';
    bytes += name;
    bytes += '\n';
  }
  void str(const std::string& s) {
    op('X');
    u32(static_cast<uint32_t>(s.size()));
    bytes += s;
  }
  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');
      bytes.push_back(static_cast<char>(v));
    } else if (v >= 0 && v < 65536) {
      op('M');
      const uint16_t x = static_cast<uint16_t>(v);
      raw(&x, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      const int32_t x = static_cast<int32_t>(v);
      raw(&x, 4);
    } else {
      op('\x8a');  // LONG1: 8 bytes, two's complement little-endian
      bytes.push_back(8);
      raw(&v, 8);
    }
  }
  void real(double v) {
    op('G');
    unsigned char b[8];
    std::memcpy(b, &v, 8);
    for (int i = 7; i >= 0; --i) bytes.push_back(static_cast<char>(b[i]));  // big-endian
  }
  void int_tuple(at::IntArrayRef values) {
    op('(');
    for (int64_t v : values) integer(v);
    op('t');
  }
  void empty_ordered_dict() {
    global("collections", "OrderedDict");
    op(')');
    op('R');
  }

  void tensor(const at::Tensor& t_in) {
    const at::Tensor t = t_in.detach().to(at::kCPU).contiguous();
    const size_t key = storages.size();
    storages.push_back(t);
    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    op('(');  // persistent id: ('storage', torch.<X>Storage, key, location, numel)
    str("storage");
    global("torch", storage_class(t.scalar_type()));
    str(std::to_string(key));
    str("cpu");
    integer(t.numel());
    op('t');
    op('Q');
    integer(0);  // storage offset
    int_tuple(t.sizes());
    int_tuple(t.strides());
    op('\x89');  // requires_grad = False
    empty_ordered_dict();  // backward hooks
    op('t');
    op('R');
  }

  void value(const c10::IValue& v) {
    if (v.isNone()) {
      op('N');
    } else if (v.isBool()) {
      op(v.toBool() ? '\x88' : '\x89');
    } else if (v.isInt()) {
      integer(v.toInt());
    } else if (v.isDouble()) {
      real(v.toDouble());
    } else if (v.isString()) {
      str(v.toStringRef());
    } else if (v.isTensor()) {
      tensor(v.toTensor());
    } else if (v.isTuple()) {
      op('(');
      for (const c10::IValue& x : v.toTupleRef().elements()) value(x);
      op('t');
    } else if (v.isList()) {
      op(']');
      op('(');
      for (const c10::IValue& x : v.toListRef()) value(x);
      op('e');
    } else if (v.isGenericDict()) {
      op('}');
      op('(');
      for (const auto& kv : v.toGenericDict()) {
        value(kv.key());
        value(kv.value());
      }
      op('u');
    } else {
      throw UserError(fmt::format("cannot save a value of type {} to .pt", v.tagKind()));
    }
  }
};

}  // namespace

std::string encode_pt(const c10::IValue& value) {
  const uint16_t probe = 1;
  PIPELAB_ASSERT(*reinterpret_cast<const char*>(&probe) == 1, "big-endian hosts are not supported");
  Pickler p;
  p.bytes = "\x80\x02";  // PROTO 2
  p.value(value);
  p.op('.');
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return n;
  });
  writer.writeRecord("data.pkl", p.bytes.data(), p.bytes.size());
  writer.writeRecord("byteorder", "little", 6);
  for (size_t i = 0; i < p.storages.size(); ++i) {
    const at::Tensor& t = p.storages[i];
    writer.writeRecord("data/" + std::to_string(i), t.data_ptr(), t.nbytes());
  }
  writer.writeEndOfFile();
  return out;
}

void save_pt(const std::string& path, const c10::IValue& value) { write_file_atomic(path, encode_pt(value)); }

c10::IValue to_ivalue(const TensorDict& tensors) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : tensors) dict.insert(name, t);
  return dict;
}

void save_tensor_dict(const std::string& path, const TensorDict& tensors) { save_pt(path, to_ivalue(tensors)); }

}  // namespace pipelab
