/// Saved tensors that OFFLOAD and RELOAD move (saved_tensors.h). Hand-written against
/// LibTorch's autograd engine because its C++ API has no other way to reach a graph's
/// SavedVariables (at::SavedTensorDefaultHooks holds Python objects only): an Engine
/// subclass whose get_default_saved_variable_hooks answers while a PackScope is open, set as
/// the process's engine with set_default_engine_stub, as PyTorch's Python engine does. Its
/// behaviour outside a scope is the base engine's.
#include "core/stage/saved_tensors.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <map>
#include <mutex>

#include "core/util/error.h"

namespace pipelab {

struct SavedTensors::Entry {
  at::Tensor tensor;  ///< what the backward will read: on the device, or on the host while away
  bool away = false;
};

namespace {

// The saved tensors the action running on this thread packs into: autograd calls the pack
// hooks with no context of ours, and each stage's actions run on one thread at a time.
thread_local SavedTensors* t_packing = nullptr;

/// One SavedVariable's hooks. Packing keeps an alias, not the variable: an output saved as
/// itself would hold its own grad_fn, a cycle (stock autograd saves an output's tensor_data
/// for the same reason).
class Hooks final : public torch::autograd::SavedVariableHooks {
 public:
  explicit Hooks(std::shared_ptr<SavedTensors::Entry> entry) : entry_(std::move(entry)) {}
  void call_pack_hook(const at::Tensor& t) override { entry_->tensor = t.detach(); }
  at::Tensor call_unpack_hook() override {
    PIPELAB_ASSERT(!entry_->away, "a backward read an offloaded activation before its RELOAD");
    return entry_->tensor;
  }

 private:
  std::shared_ptr<SavedTensors::Entry> entry_;
};

class PackingEngine final : public torch::autograd::Engine {
 public:
  ~PackingEngine() override { stop(); }
  std::unique_ptr<torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks() override {
    if (!t_packing) return nullptr;
    return std::make_unique<Hooks>(t_packing->track());
  }
};

torch::autograd::Engine& packing_engine() {
  // Never destroyed: its worker threads would otherwise be joined during static
  // destruction, after LibTorch's own statics may be gone.
  static PackingEngine* const engine = new PackingEngine();
  return *engine;
}

void install_packing_engine() {
  static std::once_flag once;
  std::call_once(once, [] { torch::autograd::set_default_engine_stub(&packing_engine); });
}

/// `t`'s view (offset, sizes, strides) on `buffer`'s storage.
at::Tensor view_on(const at::Tensor& buffer, const at::Tensor& t) {
  return at::empty({0}, t.options().device(buffer.device()))
      .set_(buffer.storage(), t.storage_offset(), t.sizes(), t.strides());
}

bool movable(const SavedTensors::Entry& e, const c10::Device& device) {
  const at::Tensor& t = e.tensor;
  return !e.away && t.defined() && t.layout() == at::kStrided && t.has_storage() && t.device() == device &&
         t.storage().nbytes() > 0;
}

}  // namespace

SavedTensors::PackScope::PackScope(SavedTensors* into) : previous_(t_packing) {
  install_packing_engine();
  t_packing = into;
}

SavedTensors::PackScope::~PackScope() { t_packing = previous_; }

std::shared_ptr<SavedTensors::Entry> SavedTensors::track() {
  auto e = std::make_shared<Entry>();
  entries_.push_back(e);
  return e;
}

int64_t SavedTensors::offload(const c10::Device& device) {
  std::map<const c10::StorageImpl*, std::vector<std::shared_ptr<Entry>>> storages;
  for (const std::weak_ptr<Entry>& weak : entries_) {
    const std::shared_ptr<Entry> e = weak.lock();
    if (e && movable(*e, device)) storages[e->tensor.storage().unsafeGetStorageImpl()].push_back(e);
  }
  int64_t moved = 0;
  for (const auto& [impl, aliases] : storages) {
    // Moved only when our aliases are the storage's sole holders, each held by its entry
    // alone: anything else that holds it (a parameter, the stage's input, a message) keeps
    // it where it is.
    bool sole = aliases.front()->tensor.storage().use_count() == aliases.size();
    for (const std::shared_ptr<Entry>& e : aliases) sole = sole && e->tensor.use_count() == 1;
    if (!sole) continue;
    const c10::Storage storage = aliases.front()->tensor.storage();
    const int64_t nbytes = static_cast<int64_t>(storage.nbytes());
    const at::Tensor bytes =
        at::empty({0}, at::TensorOptions().dtype(at::kByte).device(device)).set_(storage, 0, {nbytes}, {1});
    Moved m{{}, device::copy_to_host(bytes)};
    for (const std::shared_ptr<Entry>& e : aliases) {
      e->tensor = view_on(m.host.bytes, e->tensor);
      e->away = true;
      m.entries.push_back(e);
    }
    moved_.push_back(std::move(m));
    moved += nbytes;
  }
  away_bytes_ += moved;
  return moved;
}

int64_t SavedTensors::reload(const c10::Device& device) {
  int64_t bytes = 0;
  for (Moved& m : moved_) {
    const device::HostCopy in = device::copy_to_device(m.host.bytes, m.host.done, device);
    for (const std::weak_ptr<Entry>& weak : m.entries) {
      if (const std::shared_ptr<Entry> e = weak.lock()) {
        e->tensor = view_on(in.bytes, e->tensor);
        e->away = false;
      }
    }
    if (in.done) reloaded_.push_back(in.done);
    bytes += static_cast<int64_t>(in.bytes.nbytes());
  }
  moved_.clear();
  away_bytes_ = 0;
  return bytes;
}

void SavedTensors::before_backward(const c10::Device& device, int stage, int mb) {
  PIPELAB_ASSERT(away_bytes_ == 0,
                 "stage {}: the backward of micro-batch {} would read {} bytes of activations still on the host "
                 "(its RELOAD has not run)",
                 stage, mb, away_bytes_);
  for (const device::Ready& r : reloaded_) device::wait_ready(r, device);
  reloaded_.clear();
}

}  // namespace pipelab
