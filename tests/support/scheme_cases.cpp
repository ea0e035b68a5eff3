#include "tests/support/scheme_cases.h"

#include <fmt/format.h>

#include <cctype>
#include <map>

#include "core/scheme/scheme.h"

namespace pipelab::testing {

std::vector<SchemeCase> scheme_cases() {
  const std::map<std::string, std::vector<std::string>> variants{
      {"gpipe", {"chunks: 4, checkpoint: always"}},
      {"pipedream", {"flush: never", "vertical_sync: true"}},
      {"spectrain", {"version: 2"}},
      {"interlocking", {"mode: local", "mode: pairwise", "mode: nwise, distance: 2"}},
  };
  std::vector<SchemeCase> out;
  for (const std::string& name : Registry<Scheme>::get().names()) {
    std::vector<std::string> options{""};
    if (variants.count(name)) {
      for (const std::string& v : variants.at(name)) options.push_back(v);
    }
    for (const std::string& option : options) {
      if (name == "dp" && !option.empty()) continue;
      for (const int stages : {2, 4}) {
        // dp's stages are its replicas.
        const std::string extra = name == "dp" ? fmt::format("replicas: {}", stages) : option;
        out.push_back({fmt::format("{{type: {}{}{}}}", name, extra.empty() ? "" : ", ", extra), stages});
      }
    }
  }
  return out;
}

std::string scheme_case_name(const ::testing::TestParamInfo<SchemeCase>& info) {
  std::string name;
  for (const char c : info.param.scheme) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name + "_" + std::to_string(info.param.stages) + "stages";
}

}  // namespace pipelab::testing
