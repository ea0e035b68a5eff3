#include "tools/simulate/cluster.h"

#include <fmt/format.h>

#include <map>
#include <vector>

#include "core/config/fields.h"
#include "core/config/yaml_file.h"
#include "core/util/error.h"
#include "core/util/names.h"

namespace pipelab::sim {
namespace {

// Achieved rates are below the datasheets' peaks: about 40% of the dense 16-bit tensor-core
// peak on Hopper, 60% on the others, and 75% of the float32 one, what large matrix products
// reach in eager PyTorch; H200's float32 rate and copy bandwidth were measured on one
// (docs/simulate.md, 2026-11-26). Every preset prices by operator class (class_rates.h):
// memory-bound kernels at 88% of the datasheet's bandwidth (what the H200 measured: 4231 of
// 4800 GB/s), depthwise convolutions at 1.2% of the device's rate and convolutions under
// float32 in TensorFloat-32 on Ampere and later (tf32, at the same share of its peak as the
// 16-bit rate), both from published single-GPU throughput (docs/simulate.md, "Presets against
// published single-GPU throughput"). Links: NVLink's bandwidth per direction (half the
// datasheets' bidirectional figure), one NIC per GPU between nodes. To the host (OFFLOAD,
// RELOAD): PCIe x16's rate per direction (5.0: 64 GB/s, 4.0: 32, 3.0: 16), 80% of it assumed
// achieved; a latency of 10 us assumed, not measured. Compute overlapped by a message runs
// 1.19x slower (tools/simulate/contention.h): the mean slowdown Lee et al. measured for GPT
// and Llama training on A100, H100, MI250 and MI210 ("Characterizing Compute-Communication
// Overlap in GPU-Accelerated Distributed Deep Learning", 2025: 18.9%, at most 40%), for
// collectives; pipelines' point-to-point messages are assumed alike.
const std::map<std::string, std::string>& presets() {
  static const std::map<std::string, std::string> all = {
      {"h100_sxm", R"(name: NVIDIA H100 SXM5 80GB, 8 per node (NVLink 4, 400 Gbit/s InfiniBand NDR per GPU)
source: "datasheet: 989 TFLOP/s dense bf16/fp16, 495 tf32, 67 fp32, 3350 GB/s HBM3, NVLink 900 GB/s bidirectional; achieved: 40% and 75% of peak, 88% of the bandwidth; classes: docs/simulate.md, \"Presets against published single-GPU throughput\"; launch and action costs from the H200 step of docs/simulate.md; overlap_slowdown: Lee et al. 2025, arXiv 2507.03114"
device: {tflops: {float32: 51, tf32: 198, bfloat16: 400, float16: 400}, memory_gbs: 3350, memory_gib: 80, launch_us: 16, action_us: 20, classes: {depthwise_conv: 0.012, memory: 0.88}}
link: {gbps: 3600, latency_us: 5, devices_per_node: 8, inter_gbps: 400, inter_latency_us: 10, host_gbps: 400, host_latency_us: 10, overlap_slowdown: 1.19}
)"},
      {"h200", R"(name: NVIDIA H200 SXM 141GB, 8 per node (NVLink 4, 400 Gbit/s InfiniBand NDR per GPU)
source: "measured on one H200 (docs/simulate.md, 2026-11-26): fp32 matrix products 51 TFLOP/s, copies 4231 GB/s, the launch and action costs fitted to its ResNet-50 step; datasheet: 989 TFLOP/s dense bf16 (40% assumed achieved), 495 tf32 (40%), 141 GB; classes: docs/simulate.md, \"Presets against published single-GPU throughput\"; overlap_slowdown: Lee et al. 2025, arXiv 2507.03114"
device: {tflops: {float32: 51, tf32: 198, bfloat16: 400, float16: 400}, memory_gbs: 4231, memory_gib: 139, launch_us: 16, action_us: 20, classes: {depthwise_conv: 0.012}}
link: {gbps: 3600, latency_us: 5, devices_per_node: 8, inter_gbps: 400, inter_latency_us: 10, host_gbps: 400, host_latency_us: 10, overlap_slowdown: 1.19}
)"},
      {"a100_sxm", R"(name: NVIDIA A100 SXM4 80GB, 8 per node (NVLink 3, 200 Gbit/s InfiniBand HDR per GPU)
source: "datasheet: 312 TFLOP/s dense bf16/fp16, 156 tf32, 19.5 fp32, 2039 GB/s HBM2e, NVLink 600 GB/s bidirectional; achieved: 60% and 75% of peak, 88% of the bandwidth; classes: docs/simulate.md, \"Presets against published single-GPU throughput\"; overlap_slowdown: Lee et al. 2025, arXiv 2507.03114"
device: {tflops: {float32: 15, tf32: 94, bfloat16: 190, float16: 190}, memory_gbs: 2039, memory_gib: 80, launch_us: 16, action_us: 20, classes: {depthwise_conv: 0.012, memory: 0.88}}
link: {gbps: 2400, latency_us: 5, devices_per_node: 8, inter_gbps: 200, inter_latency_us: 10, host_gbps: 200, host_latency_us: 10, overlap_slowdown: 1.19}
)"},
      {"a100_pcie", R"(name: NVIDIA A100 PCIe 40GB, 8 per node over PCIe 4.0 x16 (200 Gbit/s InfiniBand HDR per GPU)
source: "datasheet: 312 TFLOP/s dense bf16/fp16, 156 tf32, 19.5 fp32, 1555 GB/s HBM2, PCIe 4.0 x16 32 GB/s; achieved: 60% and 75% of peak, 88% of the bandwidth, 80% of PCIe; classes: docs/simulate.md, \"Presets against published single-GPU throughput\"; overlap_slowdown: Lee et al. 2025, arXiv 2507.03114"
device: {tflops: {float32: 15, tf32: 94, bfloat16: 190, float16: 190}, memory_gbs: 1555, memory_gib: 40, launch_us: 16, action_us: 20, classes: {depthwise_conv: 0.012, memory: 0.88}}
link: {gbps: 200, latency_us: 10, devices_per_node: 8, inter_gbps: 200, inter_latency_us: 10, host_gbps: 200, host_latency_us: 10, overlap_slowdown: 1.19}
)"},
      {"v100_sxm2", R"(name: NVIDIA V100 SXM2 32GB, 8 per node (NVLink 2, 100 Gbit/s InfiniBand EDR per node pair)
source: "datasheet: 125 TFLOP/s fp16 tensor cores, 15.7 fp32, 900 GB/s HBM2, NVLink 300 GB/s bidirectional, no bf16; achieved: 60% and 85% of peak, 88% of the bandwidth; classes: docs/simulate.md, \"Presets against published single-GPU throughput\"; overlap_slowdown: Lee et al. 2025, arXiv 2507.03114"
device: {tflops: {float32: 13, bfloat16: 0, float16: 75}, memory_gbs: 900, memory_gib: 32, launch_us: 16, action_us: 20, classes: {depthwise_conv: 0.012, memory: 0.88}}
link: {gbps: 1200, latency_us: 5, devices_per_node: 8, inter_gbps: 100, inter_latency_us: 10, host_gbps: 100, host_latency_us: 10, overlap_slowdown: 1.19}
)"},
      {"rtx3090", R"(name: NVIDIA GeForce RTX 3090 24GB, 4 per host over PCIe 4.0 x16
source: "datasheet: 71 TFLOP/s dense fp16/bf16 tensor cores with float32 accumulation, 35.6 fp32 (and tf32: no faster), 936 GB/s GDDR6X, PCIe 4.0 x16 32 GB/s; achieved: 60% and 75% of peak, 88% of the bandwidth, 80% of PCIe; classes: docs/simulate.md, \"Presets against published single-GPU throughput\"; overlap_slowdown: Lee et al. 2025, arXiv 2507.03114"
device: {tflops: {float32: 27, bfloat16: 43, float16: 43}, memory_gbs: 936, memory_gib: 24, launch_us: 16, action_us: 20, classes: {depthwise_conv: 0.012, memory: 0.88}}
link: {gbps: 200, latency_us: 10, devices_per_node: 4, host_gbps: 200, host_latency_us: 10, overlap_slowdown: 1.19}
)"},
      {"p40", R"(name: NVIDIA Tesla P40 24GB, 8 on one host over PCIe 3.0 x16 (torchgpipe's benchmarks)
source: "datasheet: 11.8 TFLOP/s fp32, fp16 at 1/64 of it, 346 GB/s GDDR5, PCIe 3.0 x16 16 GB/s; achieved: 75% of the fp32 peak, 88% of the bandwidth; classes: docs/simulate.md, \"Presets against published single-GPU throughput\"; overlap_slowdown: Lee et al. 2025, arXiv 2507.03114"
device: {tflops: {float32: 9, bfloat16: 0, float16: 0.18}, memory_gbs: 346, memory_gib: 24, launch_us: 16, action_us: 20, classes: {depthwise_conv: 0.012, memory: 0.88}}
link: {gbps: 128, latency_us: 10, devices_per_node: 8, host_gbps: 100, host_latency_us: 10, overlap_slowdown: 1.19}
)"},
  };
  return all;
}

}  // namespace

template <class V>
void DtypeRates::fields(V& v) {
  v("float32", float32, "achieved dense TFLOP/s in float32", in_range(0, 1e6));
  v("tf32", tf32,
    "achieved dense TFLOP/s of convolutions under float32 where cuDNN computes them in TensorFloat-32 (its "
    "default on Ampere and later; 0 or absent: at the float32 rate)",
    in_range(0, 1e6));
  v("bfloat16", bfloat16, "achieved dense TFLOP/s in bfloat16 (0: not supported)", in_range(0, 1e6));
  v("float16", float16, "achieved dense TFLOP/s in float16 (0: not supported)", in_range(0, 1e6));
}

double DtypeRates::of(const std::string& dtype) const {
  return dtype == "bfloat16" ? bfloat16 : dtype == "float16" ? float16 : float32;
}

template <class V>
void ClusterDevice::fields(V& v) {
  v.section("tflops", tflops, "achieved dense TFLOP/s per dtype: {float32: T, bfloat16: T, float16: T}");
  v("memory_gbs", memory_gbs, "memory bandwidth, GB/s", in_range(0, 1e9));
  v("memory_gib", memory_gib, "memory per device, GiB (at least 1 MiB: 0.001)", in_range(0, 1e6));
  v("launch_us", launch_us, "host time per kernel launched, microseconds", in_range(0, 1e6));
  v("action_us", action_us, "host time per pipeline action, microseconds", in_range(0, 1e6));
  v.section("classes", classes,
            "per operator class (gemm, attention, conv, depthwise_conv, pointwise_conv, recurrent) its fraction of "
            "tflops and time per call, forward and backward; the bytes' (memory) and the update's fractions of "
            "memory_gbs: docs/simulate.md, \"Calibrated costs\"");
}

template <class V>
void Cluster::fields(V& v) {
  v("name", name, "what the cluster is");
  v("source", source, "where its figures come from");
  v.section("device", device, "one device: tflops, memory_gbs, memory_gib, launch_us, action_us");
  v.section("link", link, "links: gbps, latency_us, devices_per_node, inter_gbps, inter_latency_us");
}

void Cluster::check(const ConfigNode& node) const {
  const auto need = [&node](const char* section, const char* key, double value, const char* what) {
    if (value > 0) return;
    const ConfigNode at = node.has(section) && node.child(section).has(key) ? node.child(section).child(key)
                          : node.has(section)                               ? node.child(section)
                                                                            : node;
    at.fail(fmt::format("{}.{} is {} (or missing): {}", section, key, value, what),
            fmt::format("give {}.{} a value above 0", section, key));
  };
  if (device.tflops.float32 <= 0 && device.tflops.bfloat16 <= 0 && device.tflops.float16 <= 0) {
    (node.has("device") ? node.child("device") : node)
        .fail("no rate in device.tflops", "give device.tflops: {float32: T, bfloat16: T, float16: T} (TFLOP/s)");
  }
  need("device", "memory_gbs", device.memory_gbs, "every block's memory traffic would be free");
  need("device", "memory_gib", device.memory_gib, "no plan would fit");
  if (device.memory_gib < 1.0 / 1024) {
    node.child("device").child("memory_gib").fail(
        fmt::format("{:g} GiB is less than a megabyte: no model's weights fit", device.memory_gib),
        "give the device's memory in GiB, e.g. memory_gib: 80");
  }
  need("link", "gbps", link.gbps, "a link of 0 Gbit/s moves nothing");
  // Without inter_gbps the nodes' link is not modelled (one host, as torchgpipe's P40s).
  if (node.has("link") && node.child("link").has("inter_gbps")) {
    need("link", "inter_gbps", link.inter_gbps, "the link between nodes moves nothing");
  }
}

/// Drops the keys of `map` whose value is 0: a figure not given (a link between nodes not
/// modelled, a class at the device's own rate), which a file leaves out.
void drop_zeros(YAML::Node map) {
  std::vector<std::string> zero;
  for (const auto& kv : map) {
    if (kv.second.IsScalar() && kv.second.as<double>(1) == 0) zero.push_back(kv.first.as<std::string>());
  }
  for (const std::string& key : zero) map.remove(key);
}

std::string cluster_yaml(const Cluster& cluster) {
  FieldWriter w;
  const_cast<Cluster&>(cluster).fields(w);
  YAML::Node root = w.node();
  drop_zeros(root["link"]);
  if (root["device"]["tflops"]["tf32"].as<double>(0) == 0) root["device"]["tflops"].remove("tf32");
  drop_zeros(root["device"]["classes"]);
  if (root["device"]["classes"].size() == 0) root["device"].remove("classes");
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

bool is_cluster_preset(const std::string& name) { return presets().count(name) > 0; }

std::vector<std::string> cluster_presets() {
  std::vector<std::string> out;
  for (const auto& [name, text] : presets()) out.push_back(name);
  return out;
}

Cluster load_cluster(const std::string& name_or_path) {
  const auto preset = presets().find(name_or_path);
  std::shared_ptr<ConfigSource> source;
  YAML::Node root;
  if (preset != presets().end()) {
    source = std::make_shared<ConfigSource>("cluster preset " + name_or_path);
    root = parse_yaml(preset->second, source->file());
  } else if (name_or_path.find('/') == std::string::npos && name_or_path.find('.') == std::string::npos) {
    throw ConfigError(fmt::format("--cluster {}: no preset of that name, and not a file path. Fix: use one of: {}, or "
                                  "a cluster YAML file (docs/plan.md, \"Cluster files\")",
                                  name_or_path, join(closest_first(name_or_path, cluster_presets()), ", ")));
  } else {
    source = std::make_shared<ConfigSource>(name_or_path);
    root = load_yaml_file(name_or_path);
  }
  const ConfigNode node(root, source, "");
  node.expect_map("a cluster: name, source, device and link sections (docs/plan.md, \"Cluster files\")");
  return read_options<Cluster>(node);
}

}  // namespace pipelab::sim
