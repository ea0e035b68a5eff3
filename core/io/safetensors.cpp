#include "core/io/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/io/atomic_file.h"
#include "core/io/input_file.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

static_assert(sizeof(uint64_t) == 8, "the header length is 8 bytes");

struct Dtype {
  const char* name;
  at::ScalarType type;
};

/// The format's dtypes LibTorch has, by their names in the header.
constexpr std::array<Dtype, 12> kDtypes{{{"F64", at::kDouble},
                                         {"F32", at::kFloat},
                                         {"F16", at::kHalf},
                                         {"BF16", at::kBFloat16},
                                         {"I64", at::kLong},
                                         {"I32", at::kInt},
                                         {"I16", at::kShort},
                                         {"I8", at::kChar},
                                         {"U8", at::kByte},
                                         {"BOOL", at::kBool},
                                         {"F8_E4M3", c10::ScalarType::Float8_e4m3fn},
                                         {"F8_E5M2", c10::ScalarType::Float8_e5m2}}};

std::string dtype_names() {
  std::string out;
  for (const Dtype& d : kDtypes) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

[[noreturn]] void bad(const std::string& file, const std::string& problem) {
  throw UserError(fmt::format("{}: {}. Fix: give a safetensors file as the safetensors library writes it "
                              "(safetensors.torch.save_file) or as pipelab does",
                              file, problem));
}

uint64_t read_le64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void write_le64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

/// The deepest nesting of objects and arrays in `text` (outside strings). A safetensors
/// header nests 3 deep; bounding it before parsing keeps a hostile header from costing a
/// deep recursion anywhere.
int nesting(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

/// One tensor's header entry, checked against the data buffer's size.
struct Entry {
  std::string name;
  at::ScalarType type = at::kFloat;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

uint64_t unsigned_of(const nlohmann::json& v, const std::string& file, const std::string& what) {
  if (!v.is_number_unsigned()) bad(file, fmt::format("{} is not a non-negative integer", what));
  return v.get<uint64_t>();
}

Entry read_entry(const std::string& file, const std::string& name, const nlohmann::json& v, uint64_t buffer) {
  const std::string where = fmt::format("tensor '{}'", name);
  if (!v.is_object()) bad(file, where + " is not an object");
  for (const auto& [key, _] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      bad(file, fmt::format("{} has an unknown key '{}' (expected dtype, shape, data_offsets)", where, key));
    }
  }
  if (!v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
    bad(file, where + " lacks one of dtype, shape, data_offsets");
  }
  Entry e;
  e.name = name;
  const nlohmann::json& dtype = v["dtype"];
  const auto known = std::find_if(kDtypes.begin(), kDtypes.end(), [&](const Dtype& d) {
    return dtype.is_string() && dtype.get<std::string>() == d.name;
  });
  if (known == kDtypes.end()) {
    bad(file, fmt::format("{} has dtype {}, which pipelab does not read (it reads {})", where, dtype.dump(),
                          dtype_names()));
  }
  e.type = known->type;
  const nlohmann::json& shape = v["shape"];
  if (!shape.is_array() || shape.size() > 64) bad(file, where + " has a shape that is not a list of at most 64 sizes");
  uint64_t bytes = c10::elementSize(e.type);
  for (size_t i = 0; i < shape.size(); ++i) {
    const uint64_t d = unsigned_of(shape[i], file, fmt::format("{}'s size {}", where, i));
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(bytes, d, &bytes)) {
      bad(file, where + "'s shape is too large");
    }
    e.shape.push_back(static_cast<int64_t>(d));
  }
  const nlohmann::json& offsets = v["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) bad(file, where + "'s data_offsets is not [begin, end]");
  e.begin = unsigned_of(offsets[0], file, where + "'s begin offset");
  e.end = unsigned_of(offsets[1], file, where + "'s end offset");
  if (e.begin > e.end || e.end > buffer) {
    bad(file, fmt::format("{} lies at bytes [{}, {}) of a data buffer of {} bytes", where, e.begin, e.end, buffer));
  }
  if (e.end - e.begin != bytes) {
    bad(file, fmt::format("{} spans {} bytes, but its dtype and shape make {}", where, e.end - e.begin, bytes));
  }
  return e;
}

/// The entries of `header` in the order of their data, tiling [0, buffer) exactly.
std::vector<Entry> read_header(const std::string& file, const std::string& header, uint64_t buffer) {
  if (header.empty() || header.front() != '{') bad(file, "the header does not start with '{'");
  if (nesting(header) > 3) bad(file, "the header nests deeper than a safetensors header does");
  const nlohmann::json root = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) bad(file, "the header is not a JSON object");
  std::vector<Entry> entries;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) bad(file, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) bad(file, fmt::format("__metadata__ '{}' is not a string", k));
      }
      continue;
    }
    entries.push_back(read_entry(file, key, value, buffer));
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  uint64_t next = 0;
  for (const Entry& e : entries) {
    if (e.begin != next) {
      bad(file, fmt::format("tensor '{}' starts at byte {} of the data, where the one before it ends at {} ({})",
                            e.name, e.begin, next, e.begin < next ? "they overlap" : "a gap"));
    }
    next = e.end;
  }
  if (next != buffer) bad(file, fmt::format("the tensors end at byte {} of a data buffer of {} bytes", next, buffer));
  return entries;
}

}  // namespace

std::string encode_safetensors(const TensorDict& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__" || !names.insert(name).second) {
      throw UserError(fmt::format("safetensors: the name '{}' is {}. Fix: give every tensor a name of its own",
                                  name, name == "__metadata__" ? "reserved" : "used twice"));
    }
    const at::ScalarType type = tensor.scalar_type();  // (a structured binding is not capturable in C++17)
    const auto dtype = std::find_if(kDtypes.begin(), kDtypes.end(), [&](const Dtype& d) { return d.type == type; });
    if (dtype == kDtypes.end()) {
      throw UserError(fmt::format("safetensors: tensor '{}' has dtype {}, which the format lacks. Fix: convert it "
                                  "to one of {}",
                                  name, c10::toString(tensor.scalar_type()), dtype_names()));
    }
    const at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dtype->name}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(t);
  }
  std::string text = header.dump();
  // Padded with spaces so that the data starts 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  write_le64(out, text.size());
  out += text;
  for (const at::Tensor& t : data) out.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  return out;
}

void save_safetensors(const std::string& path, const TensorDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, encode_safetensors(tensors, metadata));
}

TensorDict decode_safetensors(const std::string& bytes, const std::string& name) {
  if (bytes.size() < 8) bad(name, fmt::format("it is {} bytes, shorter than the header's 8-byte length", bytes.size()));
  const uint64_t n = read_le64(bytes.data());
  if (n > kMaxSafetensorsHeader) bad(name, fmt::format("its header length {} is over the limit of {}", n, kMaxSafetensorsHeader));
  if (n > bytes.size() - 8) bad(name, fmt::format("its header length is {} bytes, but {} follow", n, bytes.size() - 8));
  const uint64_t buffer = bytes.size() - 8 - n;
  const std::vector<Entry> entries = read_header(name, bytes.substr(8, n), buffer);
  TensorDict out;
  const char* data = bytes.data() + 8 + n;
  for (const Entry& e : entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

TensorDict load_safetensors(const std::string& path) { return decode_safetensors(read_file(path), path); }

bool is_safetensors_path(const std::string& path) {
  const std::string ext = ".safetensors";
  return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

TensorDict load_weights(const std::string& path) {
  return is_safetensors_path(path) ? load_safetensors(path) : load_tensor_dict(path);
}

}  // namespace pipelab
