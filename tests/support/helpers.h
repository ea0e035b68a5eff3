#pragma once
/// Shared test fixtures: temporary folders, experiments from YAML text, and runs whose
/// final weights can be compared.
#include <map>
#include <string>
#include <vector>

#include "core/io/pt_file.h"
#include "core/run/runner.h"

namespace pipelab::testing {

/// A fresh folder under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// Parses an experiment from YAML text; its output goes to `out` (if not empty).
Experiment experiment(const std::string& yaml, const std::string& out = "",
                      const std::vector<std::string>& overrides = {});

/// Builds and runs `yaml` quietly; returns the final state dict.
TensorDict train(const std::string& yaml, const std::vector<std::string>& overrides = {});

/// The largest absolute difference between same-named tensors (inf if names differ).
double max_difference(const TensorDict& a, const TensorDict& b);
/// True when both dicts hold the same names and bit-identical tensors.
bool identical(const TensorDict& a, const TensorDict& b);

/// The tensors of a torch.save'd dict at `path`, by name (a reference's `<case>.w<k>`).
std::map<std::string, at::Tensor> load_tensor_map(const std::string& path);

/// The message of the UserError `fn` throws ("" if none).
std::string user_error(const std::function<void()>& fn);

/// Writes `text` to `path`.
void write_text(const std::string& path, const std::string& text);
/// Reads `path` whole.
std::string read_text(const std::string& path);

/// Runs `command` in a shell; returns (exit code, stdout+stderr).
std::pair<int, std::string> shell(const std::string& command);

/// True when python3 can import torch (for interop tests).
bool python_torch_available();

}  // namespace pipelab::testing
