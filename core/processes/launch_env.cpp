#include "core/processes/launch_env.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "core/util/error.h"

namespace pipelab::dist {
namespace {

/// The value of `name`, or nothing when unset or empty (an empty variable is unset to
/// torch.distributed's env:// too).
std::optional<std::string> value(const Getenv& get, const char* name) {
  const char* v = get(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

/// `name`'s value as a whole number in [minimum, maximum]; a UserError naming it otherwise.
int number(const Getenv& get, const char* name, int minimum, int maximum = 1 << 24) {
  const std::string text = *value(get, name);
  try {
    size_t used = 0;
    const long n = std::stol(text, &used);
    if (used == text.size() && n >= minimum && n <= maximum) return static_cast<int>(n);
  } catch (const std::exception&) {
  }
  const std::string range = maximum == 1 << 24 ? fmt::format(">= {}", minimum) : fmt::format("in {} .. {}", minimum, maximum);
  throw UserError(fmt::format("the environment variable {}='{}' is not a whole number {}. Fix: set it as the "
                              "launcher does, or unset it.",
                              name, text, range));
}

/// MASTER_ADDR: a host name or an address (IPv6 in brackets or bare), checked here so that a
/// damaged value is named as the variable it came from.
std::string master_host(const std::string& text) {
  bool ok = text.size() <= 253 && std::all_of(text.begin(), text.end(), [](unsigned char c) {
              return std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == ':' || c == '[' || c == ']';
            });
  // An address must be one: with a ':' an IPv6 address, and four numbers an IPv4 one.
  const bool numeric = text.find_first_not_of("0123456789.") == std::string::npos;
  if (ok && (text.find(':') != std::string::npos || numeric)) {
    std::string bare = text;
    if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
    unsigned char address[sizeof(in6_addr)];
    ok = ::inet_pton(bare.find(':') != std::string::npos ? AF_INET6 : AF_INET, bare.c_str(), address) == 1;
    // The store connects to the bare address ([::1] is how torchrun writes ::1).
    if (ok) return bare;
  }
  if (!ok) {
    throw UserError(fmt::format("the environment variable MASTER_ADDR='{}' is not a host name or address. Fix: set "
                                "it to rank 0's host, as the launcher does (e.g. 127.0.0.1), or unset it.",
                                text.substr(0, 80)));
  }
  return text;
}

/// MASTER_PORT, a TCP port.
int master_port(const Getenv& get) { return number(get, "MASTER_PORT", 1, 65535); }

std::string missing_error(const std::string& launcher, const std::string& set, const std::string& missing) {
  return fmt::format("the environment looks like a {} launch ({} is set) but {} is not. Fix: start pipelab with the "
                     "launcher (torchrun --no-python ... pipelab run FILE, or srun pipelab run FILE), set {}, or "
                     "unset {}.",
                     launcher, set, missing, missing, set);
}

std::optional<LaunchEnv> torchrun(const Getenv& get) {
  LaunchEnv env;
  env.launcher = "torchrun";
  const char* set = value(get, "RANK") ? "RANK" : "WORLD_SIZE";
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    if (!value(get, name)) throw UserError(missing_error(env.launcher, set, name));
  }
  env.rank = number(get, "RANK", 0);
  env.world_size = number(get, "WORLD_SIZE", 1);
  if (env.rank >= env.world_size) {
    throw UserError(fmt::format("RANK={} is not below WORLD_SIZE={}. Fix: ranks are 0 .. WORLD_SIZE-1.", env.rank,
                                env.world_size));
  }
  if (value(get, "LOCAL_RANK")) env.local_rank = number(get, "LOCAL_RANK", 0);
  if (value(get, "LOCAL_WORLD_SIZE")) env.local_world_size = number(get, "LOCAL_WORLD_SIZE", 1);
  env.master.host = master_host(*value(get, "MASTER_ADDR"));
  env.master.port = master_port(get);
  env.agent_store = value(get, "TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
  if (value(get, "TORCHELASTIC_RESTART_COUNT")) env.restart_count = number(get, "TORCHELASTIC_RESTART_COUNT", 0);
  return env;
}

/// SLURM_NTASKS_PER_NODE is "2" or, for uneven nodes, "2(x3),1"; this node's count is not
/// known from it then, so only a plain number counts.
int slurm_tasks_per_node(const Getenv& get) {
  const std::optional<std::string> v = value(get, "SLURM_NTASKS_PER_NODE");
  if (!v || v->find_first_not_of("0123456789") != std::string::npos) return 0;
  return number(get, "SLURM_NTASKS_PER_NODE", 1);
}

std::optional<LaunchEnv> slurm(const Getenv& get) {
  LaunchEnv env;
  env.launcher = "SLURM";
  if (!value(get, "SLURM_NTASKS")) throw UserError(missing_error(env.launcher, "SLURM_PROCID", "SLURM_NTASKS"));
  env.rank = number(get, "SLURM_PROCID", 0);
  env.world_size = number(get, "SLURM_NTASKS", 1);
  if (env.rank >= env.world_size) {
    throw UserError(fmt::format("SLURM_PROCID={} is not below SLURM_NTASKS={}. Fix: start the ranks with srun.",
                                env.rank, env.world_size));
  }
  if (value(get, "SLURM_LOCALID")) env.local_rank = number(get, "SLURM_LOCALID", 0);
  env.local_world_size = slurm_tasks_per_node(get);
  if (const auto addr = value(get, "MASTER_ADDR")) {
    env.master.host = master_host(*addr);
  } else if (const auto nodes = value(get, "SLURM_JOB_NODELIST") ? value(get, "SLURM_JOB_NODELIST")
                                                                 : value(get, "SLURM_NODELIST")) {
    env.master.host = first_slurm_host(*nodes);
  } else {
    throw UserError(missing_error(env.launcher, "SLURM_PROCID", "MASTER_ADDR (or SLURM_JOB_NODELIST)"));
  }
  if (value(get, "MASTER_PORT")) {
    env.master.port = master_port(get);
  } else {
    // Two jobs sharing a node must not meet at one port: each job gets its own, the same
    // on all of its ranks.
    const std::string job = value(get, "SLURM_JOB_ID").value_or("0");
    const bool digits = job.find_first_not_of("0123456789") == std::string::npos;
    env.master.port = 29500 + (digits ? std::stoi(job.substr(job.size() > 3 ? job.size() - 3 : 0)) : 0);
  }
  return env;
}

}  // namespace

std::optional<LaunchEnv> launch_env(const Getenv& get) {
  // torchrun's variables first: a torchrun inside a SLURM allocation sets them per worker,
  // while SLURM's describe the srun task that started torchrun.
  if (value(get, "RANK") || value(get, "WORLD_SIZE")) return torchrun(get);
  if (value(get, "SLURM_PROCID")) return slurm(get);
  return std::nullopt;
}

std::optional<LaunchEnv> launch_env() {
  return launch_env([](const char* name) { return std::getenv(name); });
}

// Written by hand: SLURM's own expansion (`scontrol show hostnames`, libslurm's hostlist)
// needs SLURM installed, and pipelab needs only the first host. Fuzzed in
// tests/exec/launch_env_test.cpp.
std::string first_slurm_host(const std::string& nodelist) {
  std::string out;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] != '[') {
      out += nodelist[i++];
      continue;
    }
    const size_t close = nodelist.find(']', i);
    if (close == std::string::npos) {
      throw UserError(fmt::format("SLURM_JOB_NODELIST='{}' has a '[' without its ']'. Fix: set MASTER_ADDR to the "
                                  "first host's name.",
                                  nodelist));
    }
    // "07-09,12": the first item's first number, zero padding kept.
    const std::string group = nodelist.substr(i + 1, close - i - 1);
    const std::string first = group.substr(0, group.find_first_of(",-"));
    if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) {
      throw UserError(fmt::format("SLURM_JOB_NODELIST='{}' has a range '[{}]' that does not start with a number. "
                                  "Fix: set MASTER_ADDR to the first host's name.",
                                  nodelist, group));
    }
    out += first;
    i = close + 1;
  }
  if (out.empty()) {
    throw UserError(fmt::format("SLURM_JOB_NODELIST='{}' names no host. Fix: set MASTER_ADDR to the first host's name.",
                                nodelist));
  }
  return out;
}

}  // namespace pipelab::dist
