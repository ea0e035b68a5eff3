#include "tools/simulate/profile_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <c10/util/Exception.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/io/atomic_file.h"
#include "core/model/meta_device.h"
#include "core/util/progress.h"
#include "tools/simulate/block_memory.h"

namespace pipelab::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// Bumped whenever what a profile holds changes (the key also holds the build of pipelab).
constexpr int kFormat = 8;

json affines(const std::vector<Affine>& v) {
  json out = json::array();
  for (const Affine& a : v) out.push_back({a.fixed, a.per_example});
  return out;
}
std::vector<Affine> affines(const json& j) {
  std::vector<Affine> out;
  for (const json& a : j) out.push_back({a.at(0).get<double>(), a.at(1).get<double>()});
  return out;
}

json to_json(const ModelProfile& p) {
  json blocks = json::array();
  for (const BlockProfile& b : p.blocks) {
    json live = json::array();
    for (const TensorProfile& t : b.live) live.push_back({{"name", t.name}, {"shape", t.shape}, {"bytes", t.bytes}, {"floating", t.floating}});
    json params = json::array();
    for (const auto& [name, n] : b.parameter_sizes) params.push_back({name, n});
    blocks.push_back({{"name", b.name}, {"io", b.io}, {"output_shape", b.output_shape}, {"live", live},
                      {"parameters", b.parameters}, {"flops", b.flops}, {"weight_flops", b.weight_flops}, {"kernels", b.kernels},
                      {"class_flops", b.class_flops}, {"class_calls", b.class_calls}, {"class_bytes", b.class_bytes}, {"memory_bytes", b.memory_bytes}, {"parameter_sizes", params},
                      {"parameter_shapes", b.parameter_shapes}});
  }
  const BlockMemory& m = p.memory;
  return {{"format", kFormat},
          {"from_shapes", p.from_shapes},
          {"measured_because", p.measured_because},
          {"blocks", blocks},
          {"memory",
           {{"measured", m.measured},
            {"retained_per_example", m.retained_per_example},
            {"retained_fixed", m.retained_fixed},
            {"cut_per_example", m.cut_per_example},
            {"precision", m.precision},
            {"forward_rise", affines(m.forward_rise)},
            {"backward_rise", affines(m.backward_rise)},
            {"input_backward_kept", affines(m.input_backward_kept)},
            {"input_backward_rise", affines(m.input_backward_rise)},
            {"weight_backward_rise", affines(m.weight_backward_rise)},
            {"update_rise", m.update_rise}}}};
}

ModelProfile from_json(const json& j) {
  ModelProfile p;
  p.from_shapes = j.at("from_shapes").get<bool>();
  p.measured_because = j.at("measured_because").get<std::string>();
  for (const json& b : j.at("blocks")) {
    BlockProfile out;
    out.name = b.at("name").get<std::string>();
    out.io = b.at("io").get<std::string>();
    out.output_shape = b.at("output_shape").get<std::vector<int64_t>>();
    for (const json& t : b.at("live")) {
      out.live.push_back({t.at("name").get<std::string>(), t.at("shape").get<std::vector<int64_t>>(),
                          t.at("bytes").get<int64_t>(), t.at("floating").get<bool>()});
    }
    out.parameters = b.at("parameters").get<int64_t>();
    out.flops = b.at("flops").get<int64_t>();
    out.weight_flops = b.at("weight_flops").get<int64_t>();
    out.kernels = b.at("kernels").get<int64_t>();
    out.class_flops = b.at("class_flops").get<ClassFlops>();
    out.class_calls = b.at("class_calls").get<ClassFlops>();
    out.class_bytes = b.at("class_bytes").get<ClassFlops>();
    out.memory_bytes = b.at("memory_bytes").get<int64_t>();
    for (const json& s : b.at("parameter_sizes")) out.parameter_sizes.emplace_back(s.at(0).get<std::string>(), s.at(1).get<int64_t>());
    out.parameter_shapes = b.at("parameter_shapes").get<std::vector<std::vector<int64_t>>>();
    p.blocks.push_back(std::move(out));
  }
  const json& m = j.at("memory");
  p.memory.measured = m.at("measured").get<bool>();
  p.memory.retained_per_example = m.at("retained_per_example").get<std::vector<double>>();
  p.memory.retained_fixed = m.at("retained_fixed").get<std::vector<double>>();
  p.memory.cut_per_example = m.at("cut_per_example").get<std::vector<double>>();
  p.memory.precision = m.at("precision").get<std::string>();
  p.memory.forward_rise = affines(m.at("forward_rise"));
  p.memory.backward_rise = affines(m.at("backward_rise"));
  p.memory.input_backward_kept = affines(m.at("input_backward_kept"));
  p.memory.input_backward_rise = affines(m.at("input_backward_rise"));
  p.memory.weight_backward_rise = affines(m.at("weight_backward_rise"));
  p.memory.update_rise = m.at("update_rise").get<std::vector<double>>();
  return p;
}

std::string cache_file(const std::string& key) { return cache_folder() + "/profiles/" + key + ".json"; }

/// The cached profile, if there is a readable one of this format (anything else is measured again).
std::optional<ModelProfile> read_cached(const std::string& key) {
  std::ifstream in(cache_file(key));
  if (!in) return std::nullopt;
  try {
    const json j = json::parse(in);
    if (j.at("format").get<int>() != kFormat) return std::nullopt;
    ModelProfile p = from_json(j);
    p.cached = true;
    return p;
  } catch (const std::exception&) {
    return std::nullopt;  // a truncated or foreign file: profiled again, and rewritten
  }
}

/// Writes the entry; a cache that cannot be written costs only the next run's time.
void write_cached(const std::string& key, const ModelProfile& p) {
  try {
    std::error_code ec;
    fs::create_directories(cache_folder() + "/profiles", ec);
    write_file_atomic(cache_file(key), to_json(p).dump());
  } catch (const std::exception&) {
  }
}

ModelProfile measure(const ModelDef& def, const DataSpec& data, uint64_t seed, const OptimizerFactory* optimizer,
                     bool meta, const AutocastSpec* amp, Progress* bar) {
  ModelProfile p;
  p.from_shapes = meta;
  ProfileBlocks build(def, seed, meta);  // on meta, each shape key's block is built once for both
  p.blocks = profile_blocks(def, data, build);
  if (bar) bar->update(1, meta ? "from shapes: memory" : "on this CPU: memory");
  p.memory = measure_block_memory(def, data, build, optimizer, 2, amp);
  return p;
}

}  // namespace

std::string ModelProfile::describe() const {
  if (from_shapes) return "profile from shapes (meta device)";
  if (!measured_because.empty()) return "profile measured on this CPU (" + measured_because + ")";
  return "profile measured on this CPU";
}

std::string profile_cache_key(const std::string& model_type, const YAML::Node& model_options, const DataSpec& data,
                              uint64_t seed, const YAML::Node& optimizer_options, ProfileWay way,
                              const AutocastSpec* amp) {
  std::string text = fmt::format("format {}; model {};", kFormat, model_type);
  fingerprint(model_options, text);
  text += fmt::format("data {} {} {} {} [{}];", fmt::join(data.input_shape, ","), data.classes, data.integer_input,
                      fmt::join(data.target_shape, ","), data.metric);
  text += fmt::format("seed {}; optimizer ", seed);
  fingerprint(optimizer_options, text);
  text += way == ProfileWay::Shapes ? "shapes;" : "measured;";
  if (amp) text += fmt::format("autocast {} {};", c10::toString(amp->dtype), c10::DeviceTypeName(amp->device));
  // This build of pipelab: a model's code may change while its options stay.
  text += build_fingerprint();
  return fmt::format("{:016x}", fnv1a(text));
}

ModelProfile profile_model(const ModelDef& def, const DataSpec& data, uint64_t seed, const OptimizerFactory* optimizer,
                           ProfileWay way, const std::string& cache_key, bool progress, const AutocastSpec* amp) {
  if (!cache_key.empty()) {
    if (std::optional<ModelProfile> cached = read_cached(cache_key)) return *cached;
  }
  Progress bar("profile", 2, progress);
  bar.update(0, way == ProfileWay::Shapes ? "from shapes: blocks" : "on this CPU: blocks");
  ModelProfile p;
  if (way == ProfileWay::Shapes) {
    try {
      p = measure(def, data, seed, optimizer, true, amp, &bar);
    } catch (const MetaUnsupported& e) {
      p.measured_because = meta_failure(e);
    } catch (const c10::Error& e) {
      // An operator without a meta kernel, or one that reads values (.item()).
      const bool missing = std::string(e.what()).find("Meta kernel") != std::string::npos;
      p.measured_because = meta_failure(e) + (missing ? " has no meta kernel" : "");
    }
  }
  if (!p.from_shapes) {
    const std::string why = p.measured_because;
    p = measure(def, data, seed, optimizer, false, amp, &bar);
    p.measured_because = why;
  }
  bar.finish(p.from_shapes ? "from shapes" : "measured");
  if (!cache_key.empty()) write_cached(cache_key, p);
  return p;
}

}  // namespace pipelab::sim
