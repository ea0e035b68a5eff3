#pragma once
/// Building a block on the meta device without building it on the CPU first.
///
/// LibTorch's C++ modules create their parameters with the default device (the CPU) and
/// initialise them there; moving them to meta afterwards (to_meta, core/model/meta_device.h)
/// still pays for that once per distinct block: Llama-3-8B's 128256 × 4096 embedding is 2.1 GB
/// and ten seconds of random initialisation before a profile from shapes can begin
/// (docs/plan.md, "Profiles from shapes"). Python has `with torch.device("meta")`; LibTorch's
/// C++ API has no default-device switch, so this adds one.
///
/// While a MetaConstruction is alive, every operator called on this thread passes through a
/// dispatcher fallback on the TESTING_ONLY_GenericWrapper key (LibTorch registers nothing for
/// it; ShapeAutocast uses the other testing key): an operator that takes a `device` argument —
/// the factories, `empty`, `zeros`, `arange`, `to` — gets the meta device in place of the CPU
/// (and no pinned memory); every other operator runs as it would. Initialisers then run on
/// meta tensors, where they compute nothing. A constructor that writes values into a tensor's
/// storage by hand (a TorchScript file's loader) fails on the meta tensors it is given, and
/// the caller builds that block on the CPU instead.
namespace pipelab {

class MetaConstruction {
 public:
  MetaConstruction();
  ~MetaConstruction();
  MetaConstruction(const MetaConstruction&) = delete;
  MetaConstruction& operator=(const MetaConstruction&) = delete;

 private:
  bool included_;  ///< whether an outer scope had already included the key
};

}  // namespace pipelab
