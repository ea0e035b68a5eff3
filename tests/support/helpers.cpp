#include "tests/support/helpers.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace fs = std::filesystem;

namespace pipelab::testing {

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "pipelab-test-XXXXXX").string();
  path_ = ::mkdtemp(tmpl.data());
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

Experiment experiment(const std::string& yaml, const std::string& out, const std::vector<std::string>& overrides) {
  std::vector<std::string> all = overrides;
  if (!out.empty()) all.push_back("run.output=" + out);
  all.push_back("run.progress=false");
  return Experiment::parse(yaml, "test.yaml", all);
}

TensorDict train(const std::string& yaml, const std::vector<std::string>& overrides) {
  TempDir dir;
  Experiment e = experiment(yaml, dir.file("run"), overrides);
  RunnerOptions options;
  options.quiet = true;
  Runner runner(e, options);
  runner.run();
  return load_tensor_dict(dir.file("run/checkpoints/final.pt"));
}

double max_difference(const TensorDict& a, const TensorDict& b) {
  if (a.size() != b.size()) return INFINITY;
  std::map<std::string, at::Tensor> bm(b.begin(), b.end());
  double worst = 0;
  for (const auto& [name, t] : a) {
    auto it = bm.find(name);
    if (it == bm.end() || it->second.sizes() != t.sizes()) return INFINITY;
    worst = std::max(worst, (t.to(at::kDouble) - it->second.to(at::kDouble)).abs().max().item<double>());
  }
  return worst;
}

std::map<std::string, at::Tensor> load_tensor_map(const std::string& path) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, t] : load_tensor_dict(path)) out[name] = t;
  return out;
}

bool identical(const TensorDict& a, const TensorDict& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || !at::equal(a[i].second, b[i].second)) return false;
  }
  return true;
}

std::string user_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::pair<int, std::string> shell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

bool python_torch_available() {
  static const bool available = shell("python3 -c 'import torch' >/dev/null 2>&1").first == 0;
  return available;
}

}  // namespace pipelab::testing
