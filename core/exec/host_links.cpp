#include "core/exec/host_links.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "core/schedule/lower.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

const char* const kOtherMachine = "they are on different machines";

/// One report line per pair: "sender receiver ok|fail rest-of-line".
struct PairReport {
  bool ok = false;
  std::string rest;  ///< the nonce when made, the reason when not
};

std::string report_line(int sender, int receiver, bool ok, const std::string& rest) {
  return fmt::format("{} {} {} {}\n", sender, receiver, ok ? "ok" : "fail", rest);
}

std::map<std::pair<int, int>, PairReport> read_reports(const std::vector<std::string>& texts) {
  std::map<std::pair<int, int>, PairReport> out;
  for (const std::string& text : texts) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      int sender = 0, receiver = 0;
      std::string status;
      words >> sender >> receiver >> status;
      PairReport r{status == "ok", ""};
      std::getline(words >> std::ws, r.rest);
      out[{sender, receiver}] = r;
    }
  }
  return out;
}

/// The rank pairs (sender, receiver) that exchange messages in `s`, each way.
std::set<std::pair<int, int>> message_pairs(const Schedule& s, ProcessWorld& world) {
  std::set<std::pair<int, int>> pairs;
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) {
      if (!is_send(a.kind)) continue;
      const int from = world.stage_owner(a.stage), to = world.stage_owner(peer(a));
      if (from == to) continue;
      pairs.insert({from, to});
      pairs.insert({to, from});  // the messages back (gradients) of a later schedule
    }
  }
  return pairs;
}

}  // namespace

std::string host_identity() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return std::string(name) + "/" + boot;
}

void HostLinks::connect(const std::string& backend, ProcessWorld& world, const Schedule& s,
                        const dist::ShmOptions& options) {
  if (connected_) return;
  connected_ = true;
  if (backend == "gloo") return;
  const int me = world.rank();
  const std::set<std::pair<int, int>> pairs = message_pairs(s, world);
  // Round 1: which rank is on which machine, and rank 0's token that names this group's segments.
  const std::string token = fmt::format("{:x}{:x}", std::random_device{}(), ::getpid());
  const std::vector<std::string> hello = world.gather_text("shm/hosts", host_identity() + " " + token);
  std::vector<std::string> host;
  for (const std::string& h : hello) host.push_back(h.substr(0, h.find(' ')));
  const std::string group = hello.at(0).substr(hello.at(0).find(' ') + 1);
  const auto name = [&](int sender, int receiver) { return fmt::format("/pipelab-{}-{}-{}", group, sender, receiver); };
  dist::ShmOptions o = options;
  o.self_rank = me;
  // Round 2: each receiver makes its segments.
  std::string made;
  for (const auto& [sender, receiver] : pairs) {
    if (receiver != me) continue;
    if (host.at(static_cast<size_t>(sender)) != host.at(static_cast<size_t>(me))) {
      made += report_line(sender, receiver, false, kOtherMachine);
      continue;
    }
    std::string why;
    o.peer_rank = sender;
    auto link = dist::ShmLink::create(name(sender, receiver), o, why);
    made += report_line(sender, receiver, link != nullptr, link ? std::to_string(link->nonce()) : why);
    if (link) in_[sender] = std::move(link);
  }
  const auto made_by = read_reports(world.gather_text("shm/made", made));
  // Round 3: each sender opens what was made for it.
  std::string opened;
  for (const auto& [pair, report] : made_by) {
    if (pair.first != me || !report.ok) continue;
    std::string why;
    o.peer_rank = pair.second;
    auto link = dist::ShmLink::open(name(pair.first, pair.second), o, std::stoull(report.rest), why);
    opened += report_line(pair.first, pair.second, link != nullptr, why);
    if (link) out_[pair.second] = std::move(link);
  }
  const auto opened_by = read_reports(world.gather_text("shm/opened", opened));
  std::string refused;
  bool other_machine_only = true;
  for (const std::pair<int, int>& pair : pairs) {
    const auto m = made_by.find(pair), op = opened_by.find(pair);
    const bool ok = m != made_by.end() && m->second.ok && op != opened_by.end() && op->second.ok;
    if (ok) {
      linked_.insert(pair);
      if (pair.second == me) in_.at(pair.first)->unlink();  // both ends hold it: the name can go
      continue;
    }
    if (pair.second == me) in_.erase(pair.first);
    const std::string why = m == made_by.end() ? "no report" : !m->second.ok ? m->second.rest : op->second.rest;
    other_machine_only = other_machine_only && why == kOtherMachine;
    if (refused.empty()) refused = fmt::format("rank {} to rank {}: {}", pair.first, pair.second, why);
  }
  if (refused.empty()) return;
  if (backend == "shm") {
    throw UserError(fmt::format("run.executor.backend: shm, but shared memory cannot join {}. Fix: backend: auto "
                                "(shared memory where it can, Gloo elsewhere), or give /dev/shm room for "
                                "run.executor.shm_mib per linked pair (Docker: --shm-size).",
                                refused));
  }
  // Between machines Gloo is what anyone would expect, and says nothing.
  if (me == 0 && !other_machine_only) std::fprintf(stderr, "pipelab: backend %s uses gloo from %s\n", backend.c_str(), refused.c_str());
}

dist::ShmLink* HostLinks::to(int rank) const {
  const auto it = out_.find(rank);
  return it == out_.end() ? nullptr : it->second.get();
}

dist::ShmLink* HostLinks::from(int rank) const {
  const auto it = in_.find(rank);
  return it == in_.end() ? nullptr : it->second.get();
}

void HostLinks::abort() {
  for (auto& [rank, link] : out_) link->abort();
  for (auto& [rank, link] : in_) link->abort();
}

void HostLinks::reset() {
  for (auto& [rank, link] : out_) link->reset();
  for (auto& [rank, link] : in_) link->reset();
}

std::set<std::pair<int, int>> HostLinks::linked() const { return linked_; }

}  // namespace pipelab
