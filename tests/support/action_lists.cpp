#include "tests/support/action_lists.h"

#include <fstream>
#include <sstream>

namespace pipelab::testing {

ActionLists executed_actions(const std::string& run, const ActionLists& like) {
  ActionLists lists;
  std::ifstream in(run + "/metrics/actions.csv");
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string device, stage, action, mb;
    std::getline(fields, device, ',');
    std::getline(fields, stage, ',');
    std::getline(fields, action, ',');
    std::getline(fields, mb, ',');
    const int d = std::stoi(device);
    const auto want = like.find(d);
    if (want == like.end() || lists[d].size() >= want->second.size()) continue;
    lists[d].push_back(stage + action + (mb.empty() || mb == "-1" ? "" : mb));
  }
  return lists;
}

}  // namespace pipelab::testing
