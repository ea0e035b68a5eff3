// The launchers' environments (core/processes/launch_env.h): torchrun's and SLURM's variables read
// as torch.distributed's env:// reads them, a half-set environment named, and SLURM's host
// list parser fuzzed (it is written by hand).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include <fmt/format.h>

#include "core/processes/launch_env.h"
#include "core/processes/process_group.h"
#include "core/util/error.h"
#include "tests/support/helpers.h"

namespace pipelab::dist::launch_env_test {
namespace {

using Vars = std::map<std::string, std::string>;

std::optional<LaunchEnv> read(const Vars& vars) {
  return launch_env([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const Vars& vars) {
  return testing::user_error([&] { read(vars); });
}

const Vars kTorchrun = {{"RANK", "3"},        {"WORLD_SIZE", "4"},       {"LOCAL_RANK", "1"},
                        {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "node07"}, {"MASTER_PORT", "29400"},
                        {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "2"}};

TEST(LaunchEnv, NoLauncherNoEnvironment) {
  EXPECT_FALSE(read({}).has_value());
  // A stray MASTER_ADDR (a shell profile's) is no launch.
  EXPECT_FALSE(read({{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}}).has_value());
  EXPECT_FALSE(read({{"RANK", ""}}).has_value()) << "an empty variable is unset, as for env://";
}

TEST(LaunchEnv, TorchrunsVariables) {
  const LaunchEnv env = *read(kTorchrun);
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master.str(), "node07:29400");
  EXPECT_TRUE(env.agent_store);
  EXPECT_EQ(env.restart_count, 2);
  Vars plain = kTorchrun;
  plain.erase("TORCHELASTIC_USE_AGENT_STORE");
  plain.erase("TORCHELASTIC_RESTART_COUNT");
  EXPECT_FALSE(read(plain)->agent_store);
  EXPECT_EQ(read(plain)->restart_count, 0);
  // Addresses as launchers write them: IPv4, IPv6 (bare or bracketed: torchrun writes [::1]),
  // host names. The store connects to the bare address; written back, an IPv6 one has brackets.
  for (const auto& [given, host] : std::vector<std::pair<std::string, std::string>>{
           {"10.0.0.7", "10.0.0.7"}, {"::1", "::1"}, {"[::1]", "::1"}, {"[fe80::1]", "fe80::1"}, {"node-07.cluster_a", "node-07.cluster_a"}}) {
    plain["MASTER_ADDR"] = given;
    EXPECT_EQ(read(plain)->master.host, host);
  }
  plain["MASTER_ADDR"] = "[::1]";
  EXPECT_EQ(read(plain)->master.str(), "[::1]:29400");
  const dist::Endpoint e = dist::Endpoint::parse("[::1]:29500", "--master");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 29500);
  EXPECT_EQ(dist::Endpoint::parse(e.str(), "--master").host, "::1");
}

TEST(LaunchEnv, AHalfSetTorchrunEnvironmentNamesWhatIsMissing) {
  for (const char* missing : {"WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    Vars vars = kTorchrun;
    vars.erase(missing);
    const std::string e = error_of(vars);
    EXPECT_NE(e.find(std::string(missing) + " is not"), std::string::npos) << e;
    EXPECT_NE(e.find("Fix:"), std::string::npos) << e;
  }
  Vars no_rank = kTorchrun;
  no_rank.erase("RANK");
  EXPECT_NE(error_of(no_rank).find("RANK is not"), std::string::npos) << error_of(no_rank);
}

TEST(LaunchEnv, BadValuesAreNamed) {
  for (const auto& [name, bad] : std::vector<std::pair<std::string, std::string>>{
           {"RANK", "one"}, {"RANK", "-1"}, {"WORLD_SIZE", "0"}, {"MASTER_PORT", "70000"}, {"MASTER_PORT", "29x"},
           {"LOCAL_RANK", "1.5"}, {"TORCHELASTIC_RESTART_COUNT", "x"}, {"MASTER_ADDR", "a b"},
           {"MASTER_ADDR", "host/x"}, {"MASTER_ADDR", std::string(300, 'h')}, {"MASTER_ADDR", "a:b:c"},
           {"MASTER_ADDR", "256.1.1.1"}}) {
    Vars vars = kTorchrun;
    vars[name] = bad;
    const std::string e = error_of(vars);
    EXPECT_NE(e.find(name), std::string::npos) << name << "=" << bad << ": " << e;
  }
  Vars over = kTorchrun;
  over["RANK"] = "4";
  EXPECT_NE(error_of(over).find("not below WORLD_SIZE=4"), std::string::npos) << error_of(over);
}

TEST(LaunchEnv, SlurmsVariables) {
  const Vars slurm = {{"SLURM_PROCID", "5"},           {"SLURM_NTASKS", "8"},
                      {"SLURM_LOCALID", "1"},          {"SLURM_NTASKS_PER_NODE", "4"},
                      {"SLURM_JOB_NODELIST", "gpu[07-09,12],cpu3"}, {"SLURM_JOB_ID", "4512345"}};
  const LaunchEnv env = *read(slurm);
  EXPECT_EQ(env.launcher, "SLURM");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_EQ(env.master.str(), "gpu07:29845") << "the job's own port: 29500 + the job id mod 1000";
  EXPECT_FALSE(env.agent_store);
  // An sbatch script's MASTER_ADDR and MASTER_PORT win.
  Vars chosen = slurm;
  chosen["MASTER_ADDR"] = "10.1.2.3";
  chosen["MASTER_PORT"] = "12345";
  EXPECT_EQ(read(chosen)->master.str(), "10.1.2.3:12345");
  // Uneven nodes ("2(x3),1"): this node's count is unknown.
  chosen["SLURM_NTASKS_PER_NODE"] = "2(x3),1";
  EXPECT_EQ(read(chosen)->local_world_size, 0);
  // torchrun inside an allocation: torchrun's variables describe the worker.
  Vars both = slurm;
  both.insert(kTorchrun.begin(), kTorchrun.end());
  EXPECT_EQ(read(both)->launcher, "torchrun");
  EXPECT_EQ(read(both)->rank, 3);
}

TEST(LaunchEnv, AHalfSetSlurmEnvironmentNamesWhatIsMissing) {
  EXPECT_NE(error_of({{"SLURM_PROCID", "0"}}).find("SLURM_NTASKS is not"), std::string::npos);
  const std::string no_host = error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  EXPECT_NE(no_host.find("MASTER_ADDR (or SLURM_JOB_NODELIST)"), std::string::npos) << no_host;
  EXPECT_NE(error_of({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "a"}}).find("not below"),
            std::string::npos);
}

TEST(LaunchEnv, FirstSlurmHost) {
  for (const auto& [list, first] : std::vector<std::pair<std::string, std::string>>{
           {"node01", "node01"},
           {"node[01-04]", "node01"},
           {"node[007,9-10]", "node007"},
           {"gpu3,cpu[1-2]", "gpu3"},
           {"rack[2-3]-node[10-11]", "rack2-node10"},
           {"a[5]", "a5"},
           {"x-y.example.org", "x-y.example.org"}}) {
    EXPECT_EQ(first_slurm_host(list), first) << list;
  }
  for (const std::string bad : {"", ",node1", "node[", "node[x-1]", "node[]", "node[-3]"}) {
    EXPECT_NE(testing::user_error([&] { first_slurm_host(bad); }).find("MASTER_ADDR"), std::string::npos) << bad;
  }
}

TEST(LaunchEnv, FirstSlurmHostFuzz) {
  // Generated lists: the first host is known by construction.
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (int i = 0; i < 2000; ++i) {
    std::string list, first;
    const int hosts = 1 + pick(3);
    for (int h = 0; h < hosts; ++h) {
      std::string text, head;
      for (int part = 0; part < 1 + pick(3); ++part) {
        const std::string name = std::string(1 + pick(4), static_cast<char>('a' + pick(26)));
        text += name;
        head += name;
        if (pick(2)) {
          const int width = 1 + pick(3);
          const std::string lo = fmt::format("{:0{}}", pick(50), width);
          text += "[" + lo + (pick(2) ? fmt::format("-{}", 50 + pick(50)) : "") + (pick(2) ? ",77]" : "]");
          head += lo;
        }
      }
      list += (h ? "," : "") + text;
      if (h == 0) first = head;
    }
    EXPECT_EQ(first_slurm_host(list), first) << list;
  }
  // Any text: a host or a UserError, never another exception.
  const std::string alphabet = "ab09[]-,.x";
  for (int i = 0; i < 20000; ++i) {
    std::string text(static_cast<size_t>(pick(12)), ' ');
    for (char& c : text) c = alphabet[static_cast<size_t>(pick(static_cast<int>(alphabet.size())))];
    try {
      const std::string host = first_slurm_host(text);
      EXPECT_FALSE(host.empty()) << text;
      EXPECT_EQ(host.find_first_of("[,"), std::string::npos) << text;
    } catch (const UserError&) {
    }
  }
}

}  // namespace
}  // namespace pipelab::dist::launch_env_test
