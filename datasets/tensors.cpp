/// `tensors`: examples from a .pt file written by Python's
/// torch.save({'x': x, 'y': y}, path) (keys configurable). x is [N, ...] (float
/// features, or integer token ids), y is [N] integer class ids, or [N, T] with a class per
/// position (a language model's next tokens). The test split is a second file, or a seeded
/// random share of the first.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>

#include "core/data/dataset.h"
#include "core/io/pt_file.h"

namespace pipelab {
namespace {

struct TensorsOptions {
  std::string path;
  std::optional<std::string> test_path;
  double test_fraction = 0.2;
  int64_t split_seed = 0;
  std::string x_key = "x";
  std::string y_key = "y";
  std::optional<int64_t> classes;
  template <class V>
  void fields(V& v) {
    v.required("path", path, ".pt file with a dict of tensors (torch.save)", non_empty);
    v("test_path", test_path, "separate .pt file for the test split");
    v("test_fraction", test_fraction, "share of `path` held out for testing when there is no test_path",
      in_half_open(0, 1));
    v("split_seed", split_seed, "seed of the train/test split", non_negative);
    v("x_key", x_key, "key of the inputs", non_empty);
    v("y_key", y_key, "key of the integer targets", non_empty);
    v("classes", classes, "number of classes (default: largest target + 1)");
  }
};

class TensorFile : public Configured<DatasetFactory, TensorsOptions> {
 public:
  using Configured::Configured;

  DatasetSplits load(const DataContext&) const override {
    auto [x, y] = read("path", options_.path);
    at::Tensor tx, ty;
    if (options_.test_path) {
      std::tie(tx, ty) = read("test_path", *options_.test_path);
    } else {
      const int64_t n = x.size(0);
      const int64_t n_test = static_cast<int64_t>(static_cast<double>(n) * options_.test_fraction);
      if (n_test < 1 || n_test >= n) {
        fail("test_fraction", fmt::format("holding out {} of {} examples leaves no train or no test example",
                                          options_.test_fraction, n),
             "use a fraction that keeps at least one example on each side, or give test_path");
      }
      at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(options_.split_seed));
      const at::Tensor perm = at::randperm(n, gen, at::kLong);
      tx = x.index_select(0, perm.narrow(0, n - n_test, n_test));
      ty = y.index_select(0, perm.narrow(0, n - n_test, n_test));
      x = x.index_select(0, perm.narrow(0, 0, n - n_test));
      y = y.index_select(0, perm.narrow(0, 0, n - n_test));
    }
    if (ty.sizes().slice(1) != y.sizes().slice(1)) {
      fail("test_path", fmt::format("test targets have shape {}, training targets {}", shape_text(ty.sizes().slice(1)),
                                    shape_text(y.sizes().slice(1))),
           "save both splits with the same target shape");
    }
    if (tx.sizes().slice(1) != x.sizes().slice(1)) {
      fail("test_path", fmt::format("test examples have shape {}, training examples {}", shape_text(tx.sizes().slice(1)),
                                    shape_text(x.sizes().slice(1))),
           "save both splits with the same example shape");
    }
    const int64_t largest = std::max(y.max().item<int64_t>(), ty.max().item<int64_t>());
    const int64_t classes = options_.classes.value_or(largest + 1);
    if (largest >= classes) {
      fail("classes", fmt::format("targets go up to {}, so there must be more than {} classes", largest, classes),
           fmt::format("set classes to at least {} or leave it out", largest + 1));
    }
    DatasetSplits out;
    out.train = std::make_shared<TensorDataset>(x, y);
    out.test = std::make_shared<TensorDataset>(tx, ty);
    out.spec.input_shape = x.sizes().slice(1).vec();
    out.spec.classes = classes;
    out.spec.integer_input = !at::isFloatingType(x.scalar_type());
    out.spec.target_shape = y.sizes().slice(1).vec();
    out.description = fmt::format("tensors from {}: {} train / {} test, shape {}, {} classes{}", options_.path,
                                  x.size(0), tx.size(0), shape_text(out.spec.input_shape), classes,
                                  y.dim() > 1 ? " per position " + shape_text(out.spec.target_shape) : "");
    return out;
  }

 private:
  std::pair<at::Tensor, at::Tensor> read(const std::string& key, const std::string& path) const {
    if (!std::filesystem::is_regular_file(path)) {
      fail(key, fmt::format("file '{}' not found", path),
           "give the path of a file written by torch.save({'x': x, 'y': y}, path)");
    }
    const c10::IValue v = load_pt(path);
    if (!v.isGenericDict()) {
      fail(key, fmt::format("{} holds a {}, not a dict", path, v.tagKind()), "save a dict: torch.save({'x': x, 'y': y}, path)");
    }
    const auto dict = v.toGenericDict();
    const auto get = [&](const std::string& name, const char* what) {
      for (const auto& kv : dict) {
        if (kv.key().isString() && kv.key().toStringRef() == name && kv.value().isTensor()) return kv.value().toTensor();
      }
      std::vector<std::string> keys;
      for (const auto& kv : dict) keys.push_back(kv.key().isString() ? kv.key().toStringRef() : "?");
      fail(key, fmt::format("{} has no tensor '{}' ({}); its keys are: {}", path, name, what, join(keys, ", ")),
           fmt::format("set {} to one of them", std::string(what) == "inputs" ? "x_key" : "y_key"));
    };
    at::Tensor x = get(options_.x_key, "inputs"), y = get(options_.y_key, "targets");
    if (x.dim() < 1 || y.dim() < 1 || x.size(0) != y.size(0)) {
      fail(key, fmt::format("{}: x has shape {} and y {}; expected x [N, ...] and y [N] (or [N, T], a target per "
                            "position)",
                            path, shape_text(x.sizes()), shape_text(y.sizes())),
           "save one target (or one row of targets) per example");
    }
    const at::ScalarType xt = x.scalar_type();
    if (!at::isFloatingType(xt) && xt != at::kLong) {
      fail(key, fmt::format("{}: x has dtype {}; inputs must be floating point (features) or int64 (token ids)", path,
                            c10::toString(xt)),
           "save x as x.float() for features, or x.long() for token ids");
    }
    if (at::isFloatingType(y.scalar_type()) || y.scalar_type() == at::kBool) {
      fail(key, fmt::format("{}: y has dtype {}; class targets must be integers", path, c10::toString(y.scalar_type())),
           "save y as a long tensor (y.long())");
    }
    if (y.numel() > 0 && y.min().item<int64_t>() < 0) {
      fail(key, fmt::format("{}: y has negative class ids", path), "use class ids 0..classes-1");
    }
    if (x.size(0) == 0) fail(key, fmt::format("{} holds no examples", path), "save at least one example");
    return {x.contiguous(), y.to(at::kLong)};
  }
};

}  // namespace

PIPELAB_REGISTER(DatasetFactory, TensorFile, "tensors", "x and y tensors from a .pt file written by torch.save");

}  // namespace pipelab
