#include "core/model/meta_device.h"

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include <mutex>

#include "core/model/meta_construction.h"
#include "core/model/meta_shapes.h"

namespace pipelab {
namespace {

/// The meta allocator's storage (none), with its size reported to the thread's memory
/// reporter: allocations and frees carry a unique fake address, the context's own, which
/// lives as long as the storage.
class CountingMetaAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    auto* context = new Storage{nbytes};
    c10::reportMemoryUsageToProfiler(context, static_cast<int64_t>(nbytes), 0, 0, c10::Device(c10::DeviceType::CPU));
    return {nullptr, context, &release, c10::Device(c10::DeviceType::Meta)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* /*dest*/, const void* /*src*/, std::size_t /*count*/) const override {}

 private:
  struct Storage {
    size_t nbytes;
  };
  static void release(void* p) {
    auto* context = static_cast<Storage*>(p);
    c10::reportMemoryUsageToProfiler(context, -static_cast<int64_t>(context->nbytes), 0, 0,
                                     c10::Device(c10::DeviceType::CPU));
    delete context;
  }
};

CountingMetaAllocator g_meta_allocator;

/// The tensor's metadata replaced by a meta tensor's of the same shape, strides and dtype.
void move_in_place(at::Tensor& t) {
  if (!t.defined() || t.is_meta()) return;
  const at::Tensor meta = at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
  t.unsafeGetTensorImpl()->shallow_copy_from(meta.getIntrusivePtr());
}

}  // namespace

void enable_meta_profiling() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Priority above the built-in meta allocator's (registered at priority 0).
    c10::SetAllocator(c10::DeviceType::Meta, &g_meta_allocator, /*priority=*/1);
    register_meta_shape_functions();
  });
}

void to_meta(torch::nn::Module& module) {
  enable_meta_profiling();
  for (at::Tensor& p : module.parameters()) move_in_place(p);
  for (at::Tensor& b : module.buffers()) move_in_place(b);
}

Block ProfileBlocks::build_on_meta(size_t index) const {
  try {
    MetaConstruction on_meta;
    return build_block(def_, index, seed_);
  } catch (const std::exception&) {
    // A constructor that needs values (a TorchScript file's loader): built on the CPU, then
    // moved.
    return build_block(def_, index, seed_);
  }
}

Block ProfileBlocks::operator()(size_t index) {
  const BlockRecipe& recipe = def_.blocks.at(index);
  if (!meta_) return build_block(def_, index, seed_);
  // Meta modules hold no storage: each is kept for the next profile that asks.
  const std::string key = recipe.shape_key.empty() ? "#" + std::to_string(index) : recipe.shape_key;
  const auto found = built_.find(key);
  if (found != built_.end()) return {recipe.name, found->second, recipe.io};
  Block block = build_on_meta(index);
  to_meta(*block.module.ptr());
  built_.emplace(key, block.module);
  return block;
}

void check_meta_faithful(const std::string& op) {
  for (const char* fused : {"aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu"}) {
    if (op == fused) {
      throw MetaUnsupported(op + ": its kernels keep a workspace for the backward that its cells on the meta device do not");
    }
  }
}

std::string meta_failure(const std::exception& e) {
  const std::string what = e.what();
  if (dynamic_cast<const MetaUnsupported*>(&e)) return what;
  const size_t aten = what.find("aten::");
  if (aten != std::string::npos) {
    size_t end = aten + 6;
    while (end < what.size() && (std::isalnum(static_cast<unsigned char>(what[end])) || what[end] == '_' ||
                                 what[end] == '.')) {
      ++end;
    }
    return what.substr(aten, end - aten);
  }
  return what.substr(0, what.find('\n'));
}

}  // namespace pipelab
