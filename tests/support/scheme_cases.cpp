#include "tests/support/scheme_cases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "core/config/config_node.h"
#include "core/scheme/scheme.h"

namespace pipelab::testing {
namespace {

std::unique_ptr<Scheme> make_scheme(const std::string& section) {
  auto source = std::make_shared<ConfigSource>("<scheme case>");
  return Registry<Scheme>::get().create(ConfigNode(YAML::Load(section), source, "scheme"));
}

/// The registry's cases, of the schemes that split sequences or of the others.
std::vector<SchemeCase> registry_cases(bool sequences) {
  const std::map<std::string, std::vector<std::string>> variants{
      {"gpipe", {"chunks: 4, checkpoint: always"}},
      {"pipedream", {"flush: never", "vertical_sync: true"}},
      {"pipedream_2bw", {"flush: never, micro_batches: 2", "flush: epoch, micro_batches: 2"}},
      {"paci", {"accumulation: 2, backward: stash", "accumulation: 3, backward: recompute, flush: never"}},
      {"spectrain", {"version: 2"}},
      {"interlocking", {"mode: local", "mode: pairwise", "mode: nwise, distance: 2"}},
      {"dgl", {"buffer: 2, max_reuse: 2"}},
      {"interleaved_1f1b", {"chunks: 4, virtual_stages: 2"}},
      {"looped_bfs", {"chunks: 4, virtual_stages: 2"}},
      {"zb_h1", {"chunks: 4, virtual_stages: 2"}},
      {"seq1f1b", {"chunks: 2, segments: 3, virtual_stages: 2, segmentation: equal_tokens"}},
      {"pipemare", {"rescheduling_steps: 10", "rescheduling_steps: 10, correction: backward, velocity_decay: 0.5",
                    "rescheduling_steps: 10, correction: forward, velocity_decay: 0.5, flush: never"}},
      {"ftpipe", {"predictor: msnag, stash: true, gap_aware: all_except_last",
                  "predictor: aggmsnag, nag_with_predictor: true, nesterov_last_partition: true, recompute: false"}},
      {"xpipe",
       {"micro_batches: 2, adam_only: false", "micro_batches: 3, adam_only: false, bellwether: reuse, flush: never"}},
  };
  // Schemes whose default cannot run every case (interleaving needs 2 stages per device and a
  // multiple of the devices as micro-batches; pipedream_2bw's default never flushes, which
  // multi-process runs refuse, and the cases spell it out so that their tests expect it;
  // PipeMare's K has no default; xpipe's default needs Adam, these tests train with SGD):
  // their variants above stand for them.
  const std::set<std::string> variants_only{"interleaved_1f1b", "looped_bfs", "pipedream_2bw", "pipemare", "xpipe"};
  std::vector<SchemeCase> out;
  for (const std::string& name : Registry<Scheme>::get().names()) {
    if (name == "custom") continue;
    std::vector<std::string> options;
    if (!variants_only.count(name)) options.push_back("");
    if (variants.count(name)) {
      for (const std::string& v : variants.at(name)) options.push_back(v);
    }
    for (const std::string& option : options) {
      if (name == "dp" && !option.empty()) continue;
      for (const int stages : {2, 4}) {
        // dp's stages are its replicas.
        const std::string extra = name == "dp" ? fmt::format("replicas: {}", stages) : option;
        const std::string section = fmt::format("{{type: {}{}{}}}", name, extra.empty() ? "" : ", ", extra);
        const std::unique_ptr<Scheme> scheme = make_scheme(section);
        if (scheme->sequence_split().active() != sequences) continue;
        const std::vector<int> placement = scheme->placement(stages);
        out.push_back({section, stages, *std::max_element(placement.begin(), placement.end()) + 1});
      }
    }
  }
  return out;
}

}  // namespace

std::vector<SchemeCase> sequence_scheme_cases() { return registry_cases(true); }

std::vector<SchemeCase> scheme_cases() {
  std::vector<SchemeCase> out = registry_cases(false);
  // Schedules from files: a hand-written 1F1B (text) and an interleaved one (torch CSV).
  const std::string dir = PIPELAB_EXPERIMENTS_DIR "/schedules/";
  out.push_back({"{type: custom, file: '" + dir + "1f1b_d2_m4.sched'}", 2, 2});
  out.push_back({"{type: custom, file: '" + dir + "interleaved_d2_v2_m4.csv', virtual_stages: 2}", 4, 2});
  return out;
}

std::string scheme_case_name(const ::testing::TestParamInfo<SchemeCase>& info) {
  std::string name;
  for (const char c : info.param.scheme) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name + "_" + std::to_string(info.param.stages) + "stages";
}

}  // namespace pipelab::testing
