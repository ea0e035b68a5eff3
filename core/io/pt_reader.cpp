/// Reads torch.save's format: the zip container via PyTorchStreamReader, and the pickle
/// in data.pkl with a small unpickler for the opcodes and globals that state dicts and
/// containers of tensors use (protocols 2-5).
#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <variant>

#include "core/io/pt_file.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

struct Value;
using ValuePtr = std::shared_ptr<Value>;
struct Global {
  std::string module, name;
};
struct Storage {
  at::Tensor data;  // 1-D, whole storage
};
struct Mark {};
/// An unpickled object; containers are shared so memoised objects mutate in place.
struct Value {
  enum class Kind { None, Bool, Int, Double, String, Tensor, List, Tuple, Dict, Global, Storage, Mark } kind;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;
  at::Tensor t;
  std::vector<ValuePtr> items;                        // list, tuple
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;  // dict
  Global g;
};

ValuePtr make(Value::Kind k) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  return v;
}

at::ScalarType storage_dtype(const std::string& name) {
  static const std::map<std::string, at::ScalarType> types{
      {"FloatStorage", at::kFloat},     {"DoubleStorage", at::kDouble},  {"HalfStorage", at::kHalf},
      {"BFloat16Storage", at::kBFloat16}, {"LongStorage", at::kLong},    {"IntStorage", at::kInt},
      {"ShortStorage", at::kShort},     {"CharStorage", at::kChar},      {"ByteStorage", at::kByte},
      {"BoolStorage", at::kBool},       {"ComplexFloatStorage", at::kComplexFloat},
      {"ComplexDoubleStorage", at::kComplexDouble}, {"UntypedStorage", at::kByte}};
  auto it = types.find(name);
  if (it == types.end()) throw UserError("unsupported storage type torch." + name);
  return it->second;
}

class Unpickler {
 public:
  Unpickler(const std::string& pickle, caffe2::serialize::PyTorchStreamReader& reader, std::string file)
      : data_(pickle), reader_(reader), file_(std::move(file)) {}

  ValuePtr run() {
    for (;;) {
      const unsigned char op = byte();
      switch (op) {
        case 0x80: byte(); break;          // PROTO
        case 0x95: bytes(8); break;        // FRAME
        case '.': return pop();            // STOP
        case '(': marks_.push_back(stack_.size()); break;
        case '0': pop(); break;
        case '1': stack_.resize(pop_mark()); break;
        case '2': stack_.push_back(stack_.back()); break;
        case 'N': stack_.push_back(make(Value::Kind::None)); break;
        case 0x88: push_bool(true); break;
        case 0x89: push_bool(false); break;
        case 'J': { int32_t v; std::memcpy(&v, bytes(4), 4); push_int(v); break; }
        case 'K': push_int(byte()); break;
        case 'M': { uint16_t v; std::memcpy(&v, bytes(2), 2); push_int(v); break; }
        case 0x8a: push_long(byte()); break;
        case 0x8b: { uint32_t n; std::memcpy(&n, bytes(4), 4); push_long(n); break; }
        case 'G': {
          unsigned char b[8];
          const char* p = bytes(8);
          for (int k = 0; k < 8; ++k) b[k] = static_cast<unsigned char>(p[7 - k]);
          auto v = make(Value::Kind::Double);
          std::memcpy(&v->d, b, 8);
          stack_.push_back(v);
          break;
        }
        case 'X': case 'T': case 'B': { uint32_t n; std::memcpy(&n, bytes(4), 4); push_str(n); break; }
        case 0x8c: case 'U': case 'C': push_str(byte()); break;
        case 0x8d: case 0x8e: { uint64_t n; std::memcpy(&n, bytes(8), 8); push_str(n); break; }
        case ')': stack_.push_back(make(Value::Kind::Tuple)); break;
        case 't': { auto v = make(Value::Kind::Tuple); v->items = take_marked(); stack_.push_back(v); break; }
        case 0x85: case 0x86: case 0x87: {
          const size_t n = op - 0x84u;
          auto v = make(Value::Kind::Tuple);
          v->items.assign(stack_.end() - static_cast<long>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          stack_.push_back(v);
          break;
        }
        case ']': stack_.push_back(make(Value::Kind::List)); break;
        case 'l': { auto v = make(Value::Kind::List); v->items = take_marked(); stack_.push_back(v); break; }
        case 'a': { ValuePtr x = pop(); top(Value::Kind::List)->items.push_back(x); break; }
        case 'e': { auto xs = take_marked(); auto& l = top(Value::Kind::List)->items; l.insert(l.end(), xs.begin(), xs.end()); break; }
        case '}': stack_.push_back(make(Value::Kind::Dict)); break;
        case 'd': { auto v = make(Value::Kind::Dict); set_items(*v, take_marked()); stack_.push_back(v); break; }
        case 's': { ValuePtr val = pop(), key = pop(); top(Value::Kind::Dict)->entries.emplace_back(key, val); break; }
        case 'u': { auto xs = take_marked(); set_items(*top(Value::Kind::Dict), xs); break; }
        case 'c': { auto v = make(Value::Kind::Global); v->g.module = line(); v->g.name = line(); stack_.push_back(v); break; }
        case 0x93: {
          ValuePtr name = pop(), module = pop();
          auto v = make(Value::Kind::Global);
          v->g = {module->s, name->s};
          stack_.push_back(v);
          break;
        }
        case 'R': { ValuePtr args = pop(), fn = pop(); stack_.push_back(reduce(*fn, *args)); break; }
        case 0x81: { ValuePtr args = pop(), cls = pop(); stack_.push_back(reduce(*cls, *args)); break; }
        case 'b': pop(); break;  // BUILD: object state (e.g. OrderedDict._metadata) is not needed
        case 'Q': { ValuePtr pid = pop(); stack_.push_back(persistent(*pid)); break; }
        case 'q': memo_[byte()] = stack_.back(); break;
        case 'r': { uint32_t k; std::memcpy(&k, bytes(4), 4); memo_[k] = stack_.back(); break; }
        case 0x94: { const size_t k = memo_.size(); memo_[k] = stack_.back(); break; }
        case 'h': stack_.push_back(memo(byte())); break;
        case 'j': { uint32_t k; std::memcpy(&k, bytes(4), 4); stack_.push_back(memo(k)); break; }
        default:
          fail(fmt::format("unsupported pickle opcode 0x{:02x} at byte {}", op, pos_ - 1));
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(fmt::format("{}: cannot read this .pt file: {}. Fix: save plain tensors or dicts/lists "
                                "of tensors and numbers, e.g. torch.save(model.state_dict(), path).",
                                file_, what));
  }
  unsigned char byte() {
    if (pos_ >= data_.size()) fail("the pickle ends early");
    return static_cast<unsigned char>(data_[pos_++]);
  }
  const char* bytes(size_t n) {
    if (pos_ + n > data_.size()) fail("the pickle ends early");
    const char* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::string line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string::npos) fail("a GLOBAL opcode is cut off");
    std::string out = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  ValuePtr pop() {
    if (stack_.empty()) fail("the pickle pops an empty stack");
    ValuePtr v = stack_.back();
    stack_.pop_back();
    return v;
  }
  ValuePtr top(Value::Kind k) {
    if (stack_.empty() || stack_.back()->kind != k) fail("a container opcode found no container");
    return stack_.back();
  }
  size_t pop_mark() {
    if (marks_.empty()) fail("the pickle has an unmatched MARK");
    const size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  std::vector<ValuePtr> take_marked() {
    const size_t m = pop_mark();
    std::vector<ValuePtr> out(stack_.begin() + static_cast<long>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  ValuePtr memo(size_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) fail("the pickle refers to an unknown memo entry");
    return it->second;
  }
  void set_items(Value& dict, const std::vector<ValuePtr>& xs) {
    if (xs.size() % 2) fail("a dict has an odd number of items");
    for (size_t k = 0; k < xs.size(); k += 2) dict.entries.emplace_back(xs[k], xs[k + 1]);
  }
  void push_bool(bool b) { auto v = make(Value::Kind::Bool); v->b = b; stack_.push_back(v); }
  void push_int(int64_t i) { auto v = make(Value::Kind::Int); v->i = i; stack_.push_back(v); }
  void push_long(size_t n) {
    if (n > 8) fail("integers wider than 64 bits are not supported");
    const char* p = bytes(n);
    uint64_t u = 0;
    for (size_t k = 0; k < n; ++k) u |= static_cast<uint64_t>(static_cast<unsigned char>(p[k])) << (8 * k);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(p[n - 1]) & 0x80)) u |= ~uint64_t{0} << (8 * n);
    push_int(static_cast<int64_t>(u));
  }
  void push_str(size_t n) { auto v = make(Value::Kind::String); v->s.assign(bytes(n), n); stack_.push_back(v); }

  std::vector<int64_t> ints(const Value& tuple) {
    std::vector<int64_t> out;
    for (const ValuePtr& x : tuple.items) {
      if (x->kind != Value::Kind::Int) fail("a tensor size or stride is not an integer");
      out.push_back(x->i);
    }
    return out;
  }

  ValuePtr persistent(const Value& pid) {
    // ('storage', torch.<X>Storage, key, location, numel)
    if (pid.kind != Value::Kind::Tuple || pid.items.size() < 5 || pid.items[0]->s != "storage") {
      fail("unsupported persistent id");
    }
    const std::string key = pid.items[2]->s;
    auto v = make(Value::Kind::Storage);
    auto it = storages_.find(key);
    if (it != storages_.end()) {
      v->t = it->second;
      return v;
    }
    const at::ScalarType dtype = storage_dtype(pid.items[1]->g.name);
    const int64_t numel = pid.items[4]->i;
    const std::string record = "data/" + key;
    if (!reader_.hasRecord(record)) fail("storage record " + record + " is missing");
    auto [ptr, size] = reader_.getRecord(record);
    const size_t expected = static_cast<size_t>(numel) * c10::elementSize(dtype);
    if (size != expected) fail(fmt::format("storage {} has {} bytes, expected {}", key, size, expected));
    at::Tensor t = at::empty({numel}, at::TensorOptions().dtype(dtype));
    if (size) std::memcpy(t.data_ptr(), ptr.get(), size);
    storages_[key] = t;
    v->t = t;
    return v;
  }

  ValuePtr reduce(const Value& fn, const Value& args) {
    if (fn.kind != Value::Kind::Global) fail("REDUCE on something that is not a known callable");
    const std::string name = fn.g.module + "." + fn.g.name;
    const auto& a = args.items;
    if (name == "collections.OrderedDict" || name == "builtins.dict") return make(Value::Kind::Dict);
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      if (a.size() < 4 || a[0]->kind != Value::Kind::Storage) fail("malformed tensor");
      auto v = make(Value::Kind::Tensor);
      v->t = a[0]->t.as_strided(ints(*a[2]), ints(*a[3]), a[1]->i).clone();
      return v;
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty() || a[0]->kind != Value::Kind::Tensor) fail("malformed parameter");
      return a[0];
    }
    if (name == "torch._tensor._rebuild_from_type_v2") {
      // (func, type, args, state): rebuild with func(*args), ignore the subclass.
      if (a.size() < 3) fail("malformed tensor subclass");
      return reduce(*a[0], *a[2]);
    }
    if (name == "_codecs.encode" && !a.empty()) return a[0];  // protocol-2 bytes
    if (name == "torch.device" && !a.empty()) return a[0];
    if (name == "torch.Size" && !a.empty()) return a[0];
    fail("it contains an object of type " + name);
  }

  const std::string& data_;
  caffe2::serialize::PyTorchStreamReader& reader_;
  std::string file_;
  size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<size_t, ValuePtr> memo_;
  std::map<std::string, at::Tensor> storages_;
};

c10::IValue to_ivalue(const Value& v, const std::string& file) {
  switch (v.kind) {
    case Value::Kind::None: return {};
    case Value::Kind::Bool: return v.b;
    case Value::Kind::Int: return v.i;
    case Value::Kind::Double: return v.d;
    case Value::Kind::String: return v.s;
    case Value::Kind::Tensor: return v.t;
    case Value::Kind::List: {
      c10::impl::GenericList list(c10::AnyType::get());
      for (const ValuePtr& x : v.items) list.push_back(to_ivalue(*x, file));
      return list;
    }
    case Value::Kind::Tuple: {
      std::vector<c10::IValue> xs;
      for (const ValuePtr& x : v.items) xs.push_back(to_ivalue(*x, file));
      return c10::ivalue::Tuple::create(std::move(xs));
    }
    case Value::Kind::Dict: {
      c10::impl::GenericDict dict(c10::AnyType::get(), c10::AnyType::get());
      for (const auto& [k, x] : v.entries) dict.insert_or_assign(to_ivalue(*k, file), to_ivalue(*x, file));
      return dict;
    }
    default:
      throw UserError(fmt::format("{}: cannot read this .pt file: it holds a bare {} object. Fix: save "
                                  "tensors, or dicts/lists of them.",
                                  file, v.kind == Value::Kind::Global ? v.g.module + "." + v.g.name : "storage"));
  }
}

}  // namespace

c10::IValue load_pt(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) {
    throw UserError(fmt::format("{}: file not found. Fix: check the path.", path));
  }
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  } catch (const c10::Error&) {
    throw UserError(fmt::format(
        "{}: not a PyTorch .pt file in the zip format. Fix: save it with torch.save(obj, path) from "
        "PyTorch >= 1.6 (not with _use_new_zipfile_serialization=False, pickle or numpy).",
        path));
  }
  if (reader->hasRecord("byteorder")) {
    auto [p, n] = reader->getRecord("byteorder");
    if (std::string(static_cast<const char*>(p.get()), n) != "little") {
      throw UserError(fmt::format("{}: big-endian .pt files are not supported.", path));
    }
  }
  if (!reader->hasRecord("data.pkl")) {
    throw UserError(fmt::format("{}: the archive has no data.pkl; it is not a torch.save file (a TorchScript "
                                "module?). Fix: save a state dict with torch.save(model.state_dict(), path).",
                                path));
  }
  auto [ptr, size] = reader->getRecord("data.pkl");
  const std::string pickle(static_cast<const char*>(ptr.get()), size);
  Unpickler unpickler(pickle, *reader, path);
  return to_ivalue(*unpickler.run(), path);
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
