/// `torchscript`: a model saved from Python with `torch.jit.script(model).save(path)` (or
/// `torch.jit.trace`), trained by LibTorch's TorchScript runtime — the one format in which
/// LibTorch can both load a Python model and train it. The module's top-level children, in
/// order, are the blocks (an nn.Sequential's layers, or a module whose forward calls its
/// children one after the other; anything else is refused, checked on an example). Each
/// block is a torch::nn::Module shell holding the script's own parameter and buffer tensors
/// under the script's names, so optimizers, state dicts, checkpoints and dtype and device
/// moves act on the tensors the script computes with. The weights are the file's.
///
/// torch.jit is deprecated in Python (PyTorch 2.x recommends torch.export, whose programs
/// LibTorch cannot train); docs/models.md says so.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/script.h>

#include <fmt/format.h>

#include <filesystem>
#include <tuple>
#include <utility>

#include "core/config/fields.h"
#include "core/io/input_file.h"
#include "core/model/model.h"

namespace pipelab::models {
namespace {

struct TorchScriptOptions {
  std::string file;
  template <class V>
  void fields(V& v) {
    v.required("file", file, "a module saved by torch.jit.script(model).save(path) or torch.jit.trace", non_empty);
  }
  void check(const ConfigNode& node) const {
    // A missing file, a folder, a FIFO or a loop of links, each by its name.
    try {
      check_input_file(file);
    } catch (const UserError& e) {
      throw ConfigError(fmt::format("{}: model.file: {}", node.child("file").where(), e.what()));
    }
  }
};

/// Registers `m`'s own parameters and buffers on `shell` under their names, and a shell per
/// child module, recursively: the names are the script's, the tensors the same objects.
void mirror(torch::nn::Module& shell, const torch::jit::Module& m) {
  // torch.jit.load gives parameters without requires_grad; they are all trained here.
  for (const auto& p : m.named_parameters(false)) shell.register_parameter(p.name, p.value, true);
  for (const auto& b : m.named_buffers(false)) shell.register_buffer(b.name, b.value);
  for (const auto& c : m.named_children()) {
    auto sub = std::make_shared<torch::nn::Module>();
    mirror(*sub, c.value);
    shell.register_module(c.name, sub);
  }
}

/// One block: a script module, run by the TorchScript interpreter.
class ScriptBlockImpl : public torch::nn::Module {
 public:
  explicit ScriptBlockImpl(torch::jit::Module m) : m_(std::move(m)) { mirror(*this, m_); }
  /// Floating inputs are cast to the weights' dtype: a script keeps the dtype it was saved
  /// in until the run moves it, and pipelab measures blocks with float32 examples first.
  at::Tensor forward(const at::Tensor& x) {
    const auto params = parameters();
    const bool cast = x.is_floating_point() && !params.empty() && params.front().scalar_type() != x.scalar_type();
    return m_.forward({cast ? x.to(params.front().scalar_type()) : x}).toTensor();
  }
  void train(bool on) override {
    torch::nn::Module::train(on);
    m_.train(on);
  }

 private:
  torch::jit::Module m_;
};
TORCH_MODULE(ScriptBlock);

class TorchScript : public Configured<ModelFactory, TorchScriptOptions> {
 public:
  using Configured::Configured;
  ModelDef define(const DataSpec& data) const override {
    auto root = std::make_shared<torch::jit::Module>(load());
    // The interpreter without the profiling executor's rewrites: the ops of the graph as
    // written, as Python's eager run of the same module computes them.
    torch::jit::setGraphExecutorOptimize(false);
    ModelDef def;
    for (const auto& c : root->named_children()) {
      const torch::jit::Module child = c.value;
      def.blocks.push_back(BlockRecipe(c.name, [child] {
        // A copy of the file's weights per build; cloned under no_grad so that they are leaves
        // (a clone recorded by autograd would never receive a gradient).
        at::NoGradGuard no_grad;
        return torch::nn::AnyModule(ScriptBlock(child.clone()));
      }));
    }
    if (def.blocks.empty()) {
      fail("file",
           fmt::format("the module in {} has no child modules, so there is nothing to cut into stages", options_.file),
           "save a module whose layers are children (an nn.Sequential, or submodules called in order)");
    }
    check_chain(*root, data);
    def.loss = std::make_shared<CrossEntropyLoss>();
    return def;
  }

 private:
  torch::jit::Module load() const {
    try {
      return torch::jit::load(options_.file);
    } catch (const c10::Error& e) {
      fail("file", fmt::format("{} is not a TorchScript module: {}", options_.file, e.what_without_backtrace()),
           "save it with torch.jit.script(model).save(path) (a state dict goes to init.from instead)");
    }
  }

  /// The whole module's forward must equal its children's, one after the other, in
  /// evaluation and in training mode alike, and give the logits the loss takes.
  void check_chain(torch::jit::Module& root, const DataSpec& data) const {
    std::vector<int64_t> shape{2};
    shape.insert(shape.end(), data.input_shape.begin(), data.input_shape.end());
    // A seeded generator of its own: the check draws nothing from the run's.
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(0);
    const at::Tensor x = data.integer_input ? at::zeros(shape, at::kLong) : at::randn(shape, g, at::kDouble);
    at::Tensor whole;
    for (const bool training : {false, true}) {
      at::Tensor chained;
      std::tie(whole, chained) = forwards(root, x, training, data);
      if (!whole.sizes().equals(chained.sizes()) || !at::allclose(whole, chained, 1e-9, 1e-9)) {
        fail("file",
             fmt::format("the module's forward in {} mode is not its children's forwards in their order", training
                                                                                                             ? "training"
                                                                                                             : "evaluation"),
             "script an nn.Sequential of the layers (pipelab cuts the children into stages and chains them)");
      }
    }
    root.eval();
    std::vector<int64_t> want{2};
    want.insert(want.end(), data.target_shape.begin(), data.target_shape.end());
    want.push_back(data.classes);
    if (!whole.sizes().equals(want)) {
      fail("file",
           fmt::format("the module gives {} for a batch of two, but the loss takes logits {}",
                       shape_text(whole.sizes()), shape_text(want)),
           fmt::format("end the module with a layer to {} classes", data.classes));
    }
  }

  /// The whole module's output and its children's chained, on a float64 copy in `training`
  /// mode, both under the same draws of LibTorch's generator (dropout), which is left as it was.
  std::pair<at::Tensor, at::Tensor> forwards(const torch::jit::Module& root, const at::Tensor& x, bool training,
                                             const DataSpec& data) const {
    // Not locked: the forwards' own draws take the generator's lock.
    at::Generator global = at::detail::getDefaultCPUGenerator();
    const at::Tensor saved = global.get_state();
    at::NoGradGuard no_grad;
    torch::jit::Module copy = root.clone();
    copy.to(at::kDouble);
    copy.train(training);
    global.set_current_seed(0);
    at::Tensor whole;
    try {
      whole = tensor_of(copy.forward({x}), "the module's forward");
    } catch (const std::exception& e) {
      global.set_state(saved);
      fail("file",
           fmt::format("the module does not take examples of shape {}{}: {}", shape_text(data.input_shape),
                       data.integer_input ? " (token ids)" : "", first_line(reason(e))),
           "script a module for this dataset's examples");
    }
    global.set_current_seed(0);
    at::Tensor chained = x;
    for (const auto& c : copy.named_children()) {
      try {
        torch::jit::Module child = c.value;
        if (!child.find_method("forward")) {
          TORCH_CHECK(false, "it has no forward pipelab can call with one tensor (an nn.LSTM's is overloaded and "
                             "returns a tuple; a ModuleList has none)");
        }
        chained = tensor_of(child.forward({chained}), "its forward");
      } catch (const std::exception& e) {
        global.set_state(saved);
        fail("file",
             fmt::format("child '{}', called in the order the children are declared on what those before it give (as "
                         "pipelab's stages call them), fails: {}",
                         c.name, first_line(reason(e))),
             "script an nn.Sequential whose children each take one tensor and return one");
      }
    }
    global.set_state(saved);
    return {whole, chained};
  }

  /// `v` as a tensor; anything else (an LSTM's tuple) is a c10::Error saying what it is.
  static at::Tensor tensor_of(const c10::IValue& v, const char* what) {
    TORCH_CHECK(v.isTensor(), what, " returns a ", v.tagKind(), ", not one tensor (wrap the layer in a module that "
                "returns its output tensor)");
    return v.toTensor();
  }

  /// An error's text without LibTorch's C++ backtrace. The TorchScript interpreter throws a
  /// c10::Error in LibTorch 2.15 but a std::runtime_error (torch::jit::JITException) in 2.11.
  static std::string reason(const std::exception& e) {
    const auto* c10 = dynamic_cast<const c10::Error*>(&e);
    return c10 ? c10->what_without_backtrace() : e.what();
  }

  /// The reason in a LibTorch message: its first line, or for an error inside the
  /// TorchScript interpreter (a header, the script's traceback, then the error) its last.
  static std::string first_line(const std::string& text) {
    const std::string first = text.substr(0, text.find('\n'));
    if (first.rfind("The following operation failed", 0) != 0) return first;
    std::string last;
    for (size_t p = 0, q; p < text.size(); p = q + 1) {
      q = text.find('\n', p);
      if (q == std::string::npos) q = text.size();
      const std::string line = text.substr(p, q - p);
      if (line.find_first_not_of(" \t") != std::string::npos) last = line;
    }
    const size_t colon = last.find("Error: ");
    return colon == std::string::npos ? last : last.substr(colon + 7);
  }
};

}  // namespace

PIPELAB_REGISTER(ModelFactory, TorchScript, "torchscript",
                 "a TorchScript module saved from Python, its top-level children as blocks, trained by LibTorch");

}  // namespace pipelab::models
