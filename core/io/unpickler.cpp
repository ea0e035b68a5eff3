/// The restricted unpickler (unpickler.h). Opcode semantics follow Python's pickle module
/// (Lib/pickle.py, _Unpickler): a MARK starts a new frame, and no opcode reaches below it.
#include "core/io/unpickler.h"

#include <ATen/ATen.h>

#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace pipelab::io {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

struct Value;
using ValuePtr = std::shared_ptr<Value>;

/// An unpickled object; containers are shared so that memoised objects mutate in place.
struct Value {
  enum class Kind { None, Bool, Int, Double, String, Tensor, List, Tuple, Dict, Global, Storage } kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;                                       // string; global's module
  std::string name;                                    // global's name
  at::Tensor t;                                        // tensor, storage
  std::vector<ValuePtr> items;                         // list, tuple
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;  // dict
};

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Double: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::Tensor: return "tensor";
    case Value::Kind::List: return "list";
    case Value::Kind::Tuple: return "tuple";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Global: return "global";
    case Value::Kind::Storage: return "storage";
  }
  return "?";
}

at::ScalarType storage_dtype(const std::string& name) {
  static const std::map<std::string, at::ScalarType> types{
      {"FloatStorage", at::kFloat},     {"DoubleStorage", at::kDouble},  {"HalfStorage", at::kHalf},
      {"BFloat16Storage", at::kBFloat16}, {"LongStorage", at::kLong},    {"IntStorage", at::kInt},
      {"ShortStorage", at::kShort},     {"CharStorage", at::kChar},      {"ByteStorage", at::kByte},
      {"BoolStorage", at::kBool},       {"ComplexFloatStorage", at::kComplexFloat},
      {"ComplexDoubleStorage", at::kComplexDouble}, {"UntypedStorage", at::kByte}};
  const auto it = types.find(name);
  if (it == types.end()) fail("it uses an unsupported storage type torch." + name);
  return it->second;
}

class Unpickler {
 public:
  Unpickler(const std::string& pickle, const StorageLoader& storages, int64_t max_tensor_bytes)
      : data_(pickle), load_storage_(storages), tensor_budget_(max_tensor_bytes) {}
  ~Unpickler() {
    // Break every reference between containers first: cycles are freed, and no chain of
    // nested containers is torn down recursively.
    for (const ValuePtr& c : containers_) {
      c->items.clear();
      c->entries.clear();
    }
  }
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;

  c10::IValue run() {
    const ValuePtr root = parse();
    std::set<const Value*> path;
    return convert(root, 0, path);
  }

 private:
  ValuePtr parse() {
    for (;;) {
      const unsigned char op = byte();
      switch (op) {
        case 0x80: if (byte() > 5) fail("it uses a pickle protocol newer than 5"); break;  // PROTO
        case 0x95: bytes(8); break;                                                      // FRAME
        case '.': return pop();                                                          // STOP
        case '(': marks_.push_back(stack_.size()); break;                                // MARK
        case '0': if (stack_.size() > floor()) stack_.pop_back(); else pop_mark(); break;  // POP
        case '1': stack_.resize(pop_mark()); break;                                      // POP_MARK
        case '2': need(1); stack_.push_back(stack_.back()); break;                       // DUP
        case 'N': push(make(Value::Kind::None)); break;
        case 0x88: case 0x89: { auto v = make(Value::Kind::Bool); v->b = op == 0x88; push(v); break; }
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
          push(v);
          break;
        }
        case 'X': case 'T': case 'B': { uint32_t n; std::memcpy(&n, bytes(4), 4); push_str(n); break; }
        case 0x8c: case 'U': case 'C': push_str(byte()); break;
        case 0x8d: case 0x8e: { uint64_t n; std::memcpy(&n, bytes(8), 8); push_str(n); break; }
        case ')': push(make(Value::Kind::Tuple)); break;
        case 't': { auto v = make(Value::Kind::Tuple); v->items = take_marked(); push(v); break; }
        case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
          const size_t n = op - 0x84u;
          need(n);
          auto v = make(Value::Kind::Tuple);
          v->items.assign(stack_.end() - static_cast<long>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push(v);
          break;
        }
        case ']': push(make(Value::Kind::List)); break;
        case 'l': { auto v = make(Value::Kind::List); v->items = take_marked(); push(v); break; }
        case 'a': { need(2); ValuePtr x = pop(); top(Value::Kind::List)->items.push_back(x); break; }
        case 'e': {
          auto xs = take_marked();
          auto& l = top(Value::Kind::List)->items;
          l.insert(l.end(), xs.begin(), xs.end());
          break;
        }
        case '}': push(make(Value::Kind::Dict)); break;
        case 'd': { auto v = make(Value::Kind::Dict); set_items(*v, take_marked()); push(v); break; }
        case 's': {
          need(3);
          ValuePtr val = pop(), key = pop();
          top(Value::Kind::Dict)->entries.emplace_back(key, val);
          break;
        }
        case 'u': { auto xs = take_marked(); set_items(*top(Value::Kind::Dict), xs); break; }
        case 'c': { auto v = make(Value::Kind::Global); v->s = line(); v->name = line(); push(v); break; }
        case 0x93: {  // STACK_GLOBAL
          need(2);
          ValuePtr name = pop(), module = pop();
          if (name->kind != Value::Kind::String || module->kind != Value::Kind::String) fail("a global is not named by strings");
          auto v = make(Value::Kind::Global);
          v->s = module->s;
          v->name = name->s;
          push(v);
          break;
        }
        case 'R': case 0x81: {  // REDUCE, NEWOBJ
          need(2);
          ValuePtr args = pop(), fn = pop();
          push(reduce(*fn, *args, 0));
          break;
        }
        case 'b': need(2); pop(); break;  // BUILD: object state (e.g. OrderedDict._metadata) is not needed
        case 'Q': { need(1); ValuePtr pid = pop(); push(persistent(*pid)); break; }
        case 'q': need(1); memo_[byte()] = stack_.back(); break;
        case 'r': { need(1); uint32_t k; std::memcpy(&k, bytes(4), 4); memo_[k] = stack_.back(); break; }
        case 0x94: { need(1); const size_t k = memo_.size(); memo_[k] = stack_.back(); break; }
        case 'h': push(memo(byte())); break;
        case 'j': { uint32_t k; std::memcpy(&k, bytes(4), 4); push(memo(k)); break; }
        default:
          fail(fmt::format("it has the unsupported pickle opcode 0x{:02x} at byte {}", op, pos_ - 1));
      }
    }
  }

  ValuePtr make(Value::Kind k) {
    auto v = std::make_shared<Value>();
    v->kind = k;
    if (k == Value::Kind::List || k == Value::Kind::Tuple || k == Value::Kind::Dict) containers_.push_back(v);
    return v;
  }
  /// Where the current MARK frame starts: nothing below it can be popped.
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void need(size_t n) const {
    if (stack_.size() < floor() + n) fail(fmt::format("its pickle pops an empty stack at byte {}", pos_ - 1));
  }
  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  ValuePtr pop() {
    need(1);
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  ValuePtr top(Value::Kind k) {
    need(1);
    if (stack_.back()->kind != k) {
      fail(fmt::format("its pickle adds items to a {} that is not a {}", kind_name(stack_.back()->kind), kind_name(k)));
    }
    return stack_.back();
  }
  size_t pop_mark() {
    if (marks_.empty()) fail("its pickle has an unmatched MARK");
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
  unsigned char byte() {
    if (pos_ >= data_.size()) fail("its pickle ends early");
    return static_cast<unsigned char>(data_[pos_++]);
  }
  const char* bytes(uint64_t n) {
    if (n > data_.size() - pos_) fail("its pickle ends early");
    const char* p = data_.data() + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  std::string line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string::npos) fail("a GLOBAL opcode is cut off");
    std::string out = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  ValuePtr memo(size_t k) {
    const auto it = memo_.find(k);
    if (it == memo_.end()) fail("its pickle refers to an unknown memo entry");
    return it->second;
  }
  void set_items(Value& dict, const std::vector<ValuePtr>& xs) {
    if (xs.size() % 2) fail("a dict has an odd number of items");
    for (size_t k = 0; k < xs.size(); k += 2) dict.entries.emplace_back(xs[k], xs[k + 1]);
  }
  void push_int(int64_t i) {
    auto v = make(Value::Kind::Int);
    v->i = i;
    push(v);
  }
  void push_long(uint64_t n) {
    if (n > 8) fail("it holds an integer wider than 64 bits");
    const char* p = bytes(n);
    uint64_t u = 0;
    for (size_t k = 0; k < n; ++k) u |= static_cast<uint64_t>(static_cast<unsigned char>(p[k])) << (8 * k);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(p[n - 1]) & 0x80)) u |= ~uint64_t{0} << (8 * n);
    push_int(static_cast<int64_t>(u));
  }
  void push_str(uint64_t n) {
    const char* p = bytes(n);
    auto v = make(Value::Kind::String);
    v->s.assign(p, static_cast<size_t>(n));
    push(v);
  }

  static const Value& item(const Value& tuple, size_t k, Value::Kind kind, const char* what) {
    if (k >= tuple.items.size() || tuple.items[k]->kind != kind) {
      fail(fmt::format("{} is malformed (argument {} is not a {})", what, k, kind_name(kind)));
    }
    return *tuple.items[k];
  }
  static std::vector<int64_t> ints(const Value& tuple, const char* what) {
    if (tuple.kind != Value::Kind::Tuple) fail(fmt::format("a tensor's {} is not a tuple", what));
    std::vector<int64_t> out;
    for (const ValuePtr& x : tuple.items) {
      if (x->kind != Value::Kind::Int || x->i < 0) fail(fmt::format("a tensor's {} holds a negative or non-integer entry", what));
      out.push_back(x->i);
    }
    return out;
  }

  ValuePtr persistent(const Value& pid) {
    // ('storage', torch.<X>Storage, key, location, numel)
    if (pid.kind != Value::Kind::Tuple || pid.items.size() < 5 || pid.items[0]->kind != Value::Kind::String ||
        pid.items[0]->s != "storage") {
      fail("it refers to an unsupported persistent object");
    }
    const Value& type = item(pid, 1, Value::Kind::Global, "a storage reference");
    const std::string& key = item(pid, 2, Value::Kind::String, "a storage reference").s;
    const int64_t numel = item(pid, 4, Value::Kind::Int, "a storage reference").i;
    if (numel < 0) fail("a storage has a negative size");
    const at::ScalarType dtype = storage_dtype(type.name);
    auto v = make(Value::Kind::Storage);
    const auto it = storages_.find(key);
    if (it != storages_.end()) {
      if (it->second.scalar_type() != dtype || it->second.numel() != numel) fail("storage " + key + " is declared twice, differently");
      v->t = it->second;
      return v;
    }
    v->t = load_storage_(key, dtype, numel);
    storages_[key] = v->t;
    return v;
  }

  ValuePtr rebuild_tensor(const Value& args) {
    const Value& storage = item(args, 0, Value::Kind::Storage, "a tensor");
    const int64_t offset = item(args, 1, Value::Kind::Int, "a tensor").i;
    const std::vector<int64_t> sizes = ints(item(args, 2, Value::Kind::Tuple, "a tensor"), "size");
    const std::vector<int64_t> strides = ints(item(args, 3, Value::Kind::Tuple, "a tensor"), "stride");
    if (sizes.size() != strides.size()) fail("a tensor has as many sizes as strides, but not here");
    if (offset < 0) fail("a tensor has a negative storage offset");
    // The last element it reaches must lie inside its storage (checked without overflow).
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 4;
    int64_t last = offset, numel = 1;
    bool empty = false;
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (sizes[k] == 0) empty = true;
      if (sizes[k] > kMax || (sizes[k] > 0 && strides[k] > kMax / sizes[k])) fail("a tensor's size overflows");
      last += (sizes[k] > 0 ? sizes[k] - 1 : 0) * strides[k];
      numel = sizes[k] == 0 ? 0 : (numel > kMax / sizes[k] ? kMax : numel * sizes[k]);
      if (last > kMax) fail("a tensor's size overflows");
    }
    if (!empty && last >= storage.t.numel()) {
      fail(fmt::format("a tensor reaches element {} of a storage of {} elements", last, storage.t.numel()));
    }
    const int64_t bytes = numel * static_cast<int64_t>(storage.t.element_size());
    tensor_budget_ -= bytes;
    if (tensor_budget_ < 0) fail("its tensors add up to more bytes than the file could hold");
    auto v = make(Value::Kind::Tensor);
    v->t = empty ? at::empty(sizes, storage.t.options()) : storage.t.as_strided(sizes, strides, offset).clone();
    return v;
  }

  ValuePtr reduce(const Value& fn, const Value& args, int depth) {
    if (depth > kMaxDepth) fail("its tensor rebuilds nest too deeply");
    if (fn.kind != Value::Kind::Global) fail("it calls something that is not a known function");
    if (args.kind != Value::Kind::Tuple) fail("it calls a function without an argument tuple");
    const std::string name = fn.s + "." + fn.name;
    const auto& a = args.items;
    if (name == "collections.OrderedDict" || name == "builtins.dict") return make(Value::Kind::Dict);
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") return rebuild_tensor(args);
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      item(args, 0, Value::Kind::Tensor, "a parameter");
      return a[0];
    }
    if (name == "torch._tensor._rebuild_from_type_v2") {
      // (func, type, args, state): rebuild with func(*args), ignore the subclass.
      if (a.size() < 3) fail("a tensor subclass is malformed");
      return reduce(*a[0], *a[2], depth + 1);
    }
    if ((name == "_codecs.encode" || name == "torch.device" || name == "torch.Size") && !a.empty()) return a[0];
    fail("it contains an object of type " + name);
  }

  /// The IValue of `v`: shared objects stay shared (no expansion of repeated references),
  /// a container inside itself and nesting deeper than kMaxDepth are errors.
  c10::IValue convert(const ValuePtr& v, int depth, std::set<const Value*>& path) {
    if (depth > kMaxDepth) fail(fmt::format("its containers nest deeper than {} levels", kMaxDepth));
    const auto done = converted_.find(v.get());
    if (done != converted_.end()) return done->second;
    if (path.count(v.get())) fail(fmt::format("a {} contains itself", kind_name(v->kind)));
    c10::IValue out;
    switch (v->kind) {
      case Value::Kind::None: break;
      case Value::Kind::Bool: out = v->b; break;
      case Value::Kind::Int: out = v->i; break;
      case Value::Kind::Double: out = v->d; break;
      case Value::Kind::String: out = v->s; break;
      case Value::Kind::Tensor: out = v->t; break;
      case Value::Kind::List:
      case Value::Kind::Tuple:
      case Value::Kind::Dict: {
        path.insert(v.get());
        if (v->kind == Value::Kind::Dict) {
          c10::impl::GenericDict dict(c10::AnyType::get(), c10::AnyType::get());
          for (const auto& [k, x] : v->entries) {
            const Value::Kind kk = k->kind;
            if (kk != Value::Kind::String && kk != Value::Kind::Int && kk != Value::Kind::Double &&
                kk != Value::Kind::Bool && kk != Value::Kind::None) {
              fail(fmt::format("a dict key is a {}; only str, int, float, bool and None keys are supported", kind_name(kk)));
            }
            dict.insert_or_assign(convert(k, depth + 1, path), convert(x, depth + 1, path));
          }
          out = dict;
        } else {
          std::vector<c10::IValue> xs;
          xs.reserve(v->items.size());
          for (const ValuePtr& x : v->items) xs.push_back(convert(x, depth + 1, path));
          if (v->kind == Value::Kind::Tuple) {
            out = c10::ivalue::Tuple::create(std::move(xs));
          } else {
            c10::impl::GenericList list(c10::AnyType::get());
            for (c10::IValue& x : xs) list.push_back(std::move(x));
            out = list;
          }
        }
        path.erase(v.get());
        break;
      }
      case Value::Kind::Global: fail("it holds a bare " + v->s + "." + v->name + " object");
      case Value::Kind::Storage: fail("it holds a bare storage");
    }
    converted_.emplace(v.get(), out);
    return out;
  }

  const std::string& data_;
  const StorageLoader& load_storage_;
  int64_t tensor_budget_;
  size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<size_t, ValuePtr> memo_;
  std::map<std::string, at::Tensor> storages_;
  std::vector<ValuePtr> containers_;
  std::map<const Value*, c10::IValue> converted_;
};

}  // namespace

c10::IValue unpickle(const std::string& pickle, const StorageLoader& storages, int64_t max_tensor_bytes) {
  Unpickler u(pickle, storages, max_tensor_bytes);
  return u.run();
}

}  // namespace pipelab::io
