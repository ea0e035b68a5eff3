#include "core/model/block_io.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "core/model/model.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

}  // namespace

bool BlockIO::plain() const {
  return in == std::vector<std::string>{"x"} && out == std::vector<std::string>{"x"} && stash.empty() && pop.empty();
}

std::string BlockIO::str() const { return fmt::format("({}) -> ({})", fmt::join(in, ", "), fmt::join(out, ", ")); }

BlockIO reads(std::vector<std::string> in, std::vector<std::string> out) {
  BlockIO io;
  io.in = std::move(in);
  io.out = std::move(out);
  return io;
}

BlockIO stashes(std::vector<std::string> names) {
  BlockIO io;
  io.out.insert(io.out.end(), names.begin(), names.end());
  io.stash = std::move(names);
  return io;
}

BlockIO pops(std::vector<std::string> names) {
  BlockIO io;
  io.in.insert(io.in.end(), names.begin(), names.end());
  io.pop = std::move(names);
  return io;
}

bool Dataflow::plain() const {
  return std::all_of(live.begin(), live.end(), [](const auto& names) { return names == std::vector<std::string>{"x"}; });
}

Dataflow check_dataflow(const std::vector<std::pair<std::string, BlockIO>>& blocks, const std::string& model) {
  Dataflow flow;
  std::vector<std::string> live{"x"}, skips;
  std::set<std::string> stashed_ever;
  const auto fail = [&](const std::string& block, const std::string& what, const std::string& fix) {
    throw UserError(fmt::format("model {}: block '{}': {}. Fix: {}.", model, block, what, fix));
  };
  for (const auto& [name, io] : blocks) {
    flow.live.push_back(live);
    flow.skips.push_back(skips);
    if (io.in.empty() || io.in.size() > 4) fail(name, fmt::format("reads {} tensors", io.in.size()), "read 1 to 4");
    if (io.out.empty()) fail(name, "writes no tensor", "return at least one");
    for (const std::string& n : io.in) {
      if (std::count(io.in.begin(), io.in.end(), n) > 1) fail(name, fmt::format("reads '{}' twice", n), "name it once");
      if (!contains(live, n)) {
        fail(name,
             fmt::format("reads '{}', which is not live here (live: {})", n, fmt::join(live, ", ")),
             stashed_ever.count(n) ? "pop a skip connection once, in one block"
                                   : "stash it in an earlier block, or read one of the live tensors");
      }
    }
    for (const std::string& n : io.out) {
      if (std::count(io.out.begin(), io.out.end(), n) > 1) fail(name, fmt::format("writes '{}' twice", n), "name each output once");
    }
    for (const std::string& n : io.pop) {
      if (!contains(io.in, n)) fail(name, fmt::format("pops '{}' without reading it", n), "list it in the block's inputs too");
      if (!contains(skips, n)) {
        fail(name, fmt::format("pops '{}', which no earlier block stashed", n),
             fmt::format("stash '{}' in an earlier block (the skip connection's start)", n));
      }
      if (contains(io.out, n)) fail(name, fmt::format("pops '{}' and writes it again", n), "give the new tensor another name");
    }
    for (const std::string& n : io.stash) {
      if (!contains(io.out, n)) fail(name, fmt::format("stashes '{}' without returning it", n), "list it in the block's outputs");
      if (n == "x") fail(name, "stashes 'x', the main tensor", "stash a copy under its own name");
      if (contains(live, n)) {
        fail(name, fmt::format("stashes '{}', which is already live", n),
             "give every skip connection a name of its own (names are unique while live)");
      }
    }
    for (const std::string& n : io.out) {
      if (contains(skips, n) && !contains(io.pop, n)) {
        fail(name, fmt::format("overwrites '{}', a skip connection in transit", n), "pop it first or use another name");
      }
    }
    for (const std::string& n : io.pop) {
      live.erase(std::find(live.begin(), live.end(), n));
      skips.erase(std::find(skips.begin(), skips.end(), n));
    }
    for (const std::string& n : io.out) {
      if (!contains(live, n)) live.push_back(n);
    }
    for (const std::string& n : io.stash) {
      skips.push_back(n);
      stashed_ever.insert(n);
    }
  }
  flow.live.push_back(live);
  flow.skips.push_back(skips);
  if (!skips.empty()) {
    throw UserError(fmt::format("model {}: skip connection(s) {} stashed but never popped. Fix: pop each in a later block.",
                                model, fmt::join(skips, ", ")));
  }
  // "x" is live to the end: it starts live, and only popped skips leave (never "x").
  return flow;
}

LiveSet::LiveSet(std::vector<std::string> names, Tensors values) : names_(std::move(names)), values_(std::move(values)) {
  PIPELAB_ASSERT(names_.size() == values_.size(), "{} names for {} live tensors", names_.size(), values_.size());
}

const at::Tensor& LiveSet::get(const std::string& name) const {
  const auto it = std::find(names_.begin(), names_.end(), name);
  PIPELAB_ASSERT(it != names_.end(), "no live tensor '{}' (live: {})", name, fmt::join(names_, ", "));
  return values_[static_cast<size_t>(it - names_.begin())];
}

Tensors LiveSet::take(const std::vector<std::string>& names) const {
  Tensors out;
  out.reserve(names.size());
  for (const std::string& n : names) out.push_back(get(n));
  return out;
}

void LiveSet::run(Block& block) { update(block, call_block(block, take(block.io.in))); }

void LiveSet::update(const Block& block, Tensors result) {
  PIPELAB_ASSERT(result.size() == block.io.out.size(), "block '{}' returned {} tensors for {} names", block.name,
                 result.size(), block.io.out.size());
  for (const std::string& n : block.io.pop) {
    const size_t i = static_cast<size_t>(std::find(names_.begin(), names_.end(), n) - names_.begin());
    names_.erase(names_.begin() + static_cast<std::ptrdiff_t>(i));
    values_.erase(values_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  for (size_t k = 0; k < result.size(); ++k) {
    const auto it = std::find(names_.begin(), names_.end(), block.io.out[k]);
    if (it == names_.end()) {
      names_.push_back(block.io.out[k]);
      values_.push_back(result[k]);
    } else {
      values_[static_cast<size_t>(it - names_.begin())] = result[k];
    }
  }
}

Tensors call_block(Block& block, const Tensors& a) {
  // torch::nn::AnyModule takes a fixed argument list; a block's module declares its
  // forward with one to four tensors (BlockIO::in checks the count).
  if (block.io.out.size() == 1) {
    switch (a.size()) {
      case 1: return {block.module.forward(a[0])};
      case 2: return {block.module.forward(a[0], a[1])};
      case 3: return {block.module.forward(a[0], a[1], a[2])};
      case 4: return {block.module.forward(a[0], a[1], a[2], a[3])};
      default: break;
    }
  } else {
    using Out = std::vector<at::Tensor>;
    switch (a.size()) {
      case 1: return block.module.forward<Out>(a[0]);
      case 2: return block.module.forward<Out>(a[0], a[1]);
      case 3: return block.module.forward<Out>(a[0], a[1], a[2]);
      case 4: return block.module.forward<Out>(a[0], a[1], a[2], a[3]);
      default: break;
    }
  }
  PIPELAB_ASSERT(false, "block '{}' reads {} tensors (1 to 4 allowed)", block.name, a.size());
  return {};
}

int64_t total_bytes(const Tensors& tensors) {
  int64_t n = 0;
  for (const at::Tensor& t : tensors) n += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0;
  return n;
}

}  // namespace pipelab
