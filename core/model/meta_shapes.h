#pragma once
/// Meta kernels (output shapes and dtypes, no values) for the operators a DNN block uses
/// whose meta kernels PyTorch defines in Python only (torch/_meta_registrations.py), so the
/// C++ library cannot run them on the meta device (core/model/meta_device.h). Each is
/// registered only where the loaded LibTorch has none; the shapes follow each operator's
/// documented semantics (checked in tests against the CPU kernels' outputs).
namespace pipelab {

/// Registers the shape functions (call once: enable_meta_profiling() does).
void register_meta_shape_functions();

}  // namespace pipelab
