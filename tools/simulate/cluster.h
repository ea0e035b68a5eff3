#pragma once
/// A cluster file: the devices and links `simulate` and `plan` derive costs for
/// (`--cluster FILE` or the name of a shipped preset: h100_sxm, h200, a100_sxm, a100_pcie,
/// v100_sxm2, rtx3090, p40). Every figure is per device; `source` says where each came from (docs/plan.md,
/// "Cluster files").
///
///   name: NVIDIA H100 SXM5 80GB, 8 per node
///   source: datasheet peaks; achieved rates ...
///   device: {tflops: {float32: 51, bfloat16: 400, float16: 400}, memory_gbs: 3350,
///            memory_gib: 80, launch_us: 16, action_us: 20}
///   link: {gbps: 3600, latency_us: 5, devices_per_node: 8, inter_gbps: 400, inter_latency_us: 10}
#include <string>
#include <vector>

#include "tools/simulate/class_rates.h"
#include "tools/simulate/costs.h"

namespace pipelab::sim {

/// Achieved dense TFLOP/s per dtype (0: the device has no fast path for it).
struct DtypeRates {
  double float32 = 0, bfloat16 = 0, float16 = 0;
  /// Convolutions' rate under float32 where cuDNN computes them in TensorFloat-32 (0: float32's).
  double tf32 = 0;
  template <class V>
  void fields(V& v);
  /// The rate for `dtype` ("float32", "bfloat16", "float16").
  double of(const std::string& dtype) const;
};

struct ClusterDevice {
  DtypeRates tflops;
  double memory_gbs = 0, memory_gib = 0, launch_us = 0, action_us = 0;
  ClassRates classes;  ///< per operator class (optional: `pipelab calibrate` writes them)
  template <class V>
  void fields(V& v);
};

struct Cluster {
  std::string name, source;
  ClusterDevice device;
  LinkSpec link;
  template <class V>
  void fields(V& v);
  void check(const ConfigNode& node) const;
};

/// A preset's name, or a YAML file's path: the cluster, every value checked at its key
/// (ConfigError: file, line:column, the fix).
Cluster load_cluster(const std::string& name_or_path);

/// The cluster as a file that load_cluster reads back.
std::string cluster_yaml(const Cluster& cluster);

/// Whether `name` is a shipped preset's (not a file).
bool is_cluster_preset(const std::string& name);

/// The shipped presets' names.
std::vector<std::string> cluster_presets();

/// What derived costs assume without a cluster file: the host cost per kernel and per
/// action, and the link latency, from the H200 measurement of docs/simulate.md.
constexpr double kDefaultLaunchUs = 16, kDefaultActionUs = 20, kDefaultLinkLatencyUs = 5;

}  // namespace pipelab::sim
