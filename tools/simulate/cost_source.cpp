#include "tools/simulate/cost_source.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/model/partition.h"
#include "tools/describe/model_profile.h"
#include "tools/simulate/block_memory.h"
#include "tools/simulate/codec_costs.h"

namespace pipelab::sim {
namespace {

using BlockTie = CostSource::BlockTie;

/// The model's ties (ModelDef::ties, "<block>.<param>") as block indices, the tensor's size
/// from the first block's profile.
std::vector<BlockTie> tied_blocks(const ModelDef& def, const std::vector<BlockProfile>& blocks) {
  std::vector<BlockTie> out;
  const auto block_of = [&def](const std::string& name) {
    for (size_t b = 0; b < def.blocks.size(); ++b) {
      if (name.rfind(def.blocks[b].name + ".", 0) == 0) return b;
    }
    return def.blocks.size();
  };
  for (const TiedParameter& tie : def.ties) {
    BlockTie t{block_of(tie.first), block_of(tie.second), 0};
    if (t.first == def.blocks.size() || t.second == def.blocks.size()) continue;
    const std::string param = tie.first.substr(def.blocks[t.first].name.size() + 1);
    for (const auto& [name, elements] : blocks.at(t.first).parameter_sizes) {
      if (name == param) t.elements = elements;
    }
    out.push_back(t);
  }
  return out;
}

/// The blocks' parameters from shapes; measured when the meta device cannot run the model.
std::vector<BlockProfile> parameter_profile(const ModelDef& def, const DataSpec& spec, uint64_t seed) {
  try {
    return profile_blocks(def, spec, seed, true);
  } catch (const std::exception&) {
    return profile_blocks(def, spec, seed, false);
  }
}

/// Why the costs file is another model's ("" when its stages hold the model's parameters, at
/// 2, 4 or 8 bytes each; a tie spanning two stages may count twice). `plan` refuses such
/// costs, `simulate` (a what-if tool) says so and replays them. The parameters are counted
/// from the model's profile.
std::string other_model(const SimCosts& c, const ModelDef& def, const std::vector<BlockProfile>& blocks,
                        const std::string& path) {
  double bytes = 0;
  for (const StageCosts& k : c.stages) bytes += k.parameter_bytes;
  int64_t params = 0, tied = 0;
  for (const BlockProfile& b : blocks) params += b.parameters;
  for (const BlockTie& t : tied_blocks(def, blocks)) tied += t.elements;
  if (bytes <= 0 || params <= 0) return "";  // a costs file written by hand may leave them out
  for (const double width : {4.0, 2.0, 8.0}) {
    const double counted = bytes / width;
    if (counted >= static_cast<double>(params - tied) - 0.5 && counted <= static_cast<double>(params) + 0.5) return "";
  }
  return fmt::format(
      "--costs {}: its stages hold {:.0f} bytes of parameters ({:.0f} parameters at 4 bytes each), and the "
      "experiment's model has {} parameters: these costs were measured on another model (another width, depth "
      "or kind).\nMeasure this model (`pipelab run FILE --set run.trace=true` writes metrics/costs.json), or use "
      "derived costs (--device-flops) or --time-blocks",
      path, bytes, bytes / 4, params);
}

}  // namespace

void LinkOverrides::apply(LinkSpec& link) const {
  if (gbps) link.gbps = *gbps;
  if (latency_us) link.latency_us = *latency_us;
  if (host_gbps) link.host_gbps = *host_gbps;
  if (host_latency_us) link.host_latency_us = *host_latency_us;
  if (overlap_slowdown) link.overlap_slowdown = *overlap_slowdown;
}

double optimizer_states(const OptimizerFactory& factory) { return factory.step_cost("", {1}).state_elements; }

void keep_one_pipeline(SimCosts& costs, const RunPlan& plan) {
  if (plan.layout().replicated() && costs.stages.size() == static_cast<size_t>(plan.layout().stages())) {
    costs.stages.resize(static_cast<size_t>(plan.stages()));
  }
}

CostSource::CostSource(const Experiment& e, const ModelDef& def, const DataSpec& spec, const CostSourceOptions& options)
    : e_(e), device_(options.device), preset_(options.preset) {
  if (options.costs_file.empty()) {
    profile(def, spec, options);
  } else {
    load_file(def, spec, options);
  }
}

void CostSource::load_file(const ModelDef& def, const DataSpec& spec, const CostSourceOptions& options) {
  file_ = load_costs(options.costs_file);
  other_model_ = other_model(*file_, def, parameter_profile(def, spec, static_cast<uint64_t>(e_.run.seed)),
                             options.costs_file);
  options.link.apply(file_->link);
}

void CostSource::profile(const ModelDef& def, const DataSpec& spec, const CostSourceOptions& options) {
  if (spec.integer_input && spec.input_shape.size() == 1) sequence_length_ = static_cast<double>(spec.input_shape[0]);
  const auto seed = static_cast<uint64_t>(e_.run.seed);
  const AutocastSpec* under = options.autocast ? &*options.autocast : nullptr;
  profile_ = profile_model(def, spec, seed, e_.optimizer.get(), options.way,
                           profile_cache_key(e_.model->type(), e_.model->resolved_options(), spec, seed,
                                             e_.optimizer->resolved_options(), options.way, under),
                           options.progress, under);
  if (options.time_blocks) {
    // The micro-batch sizes a plan tries run from the whole mini-batch down to a small share
    // of it: the two timed sizes span most of that range.
    const int batch = static_cast<int>(std::max<int64_t>(2, e_.run.batch_size));
    small_ = std::max(1, batch / 16);
    large_ = std::max(small_ + 1, batch);
    times_ = time_blocks(def, spec, seed, *e_.optimizer, small_, large_, std::max(1, e_.run.threads));
    // The devices here are threads of one process: replicas sum their gradients in its
    // memory, which costs time however fast the links are said to be.
    device_.link.reduce_gbps = times_.reduce_gbps;
  }
  ties_ = tied_blocks(def, profile_.blocks);
  optimizer_step_costs(profile_.blocks, *e_.optimizer, profile_.memory);
}

CostKind CostSource::kind() const {
  if (file_) return file_->step_seconds > 0 ? CostKind::Measured : CostKind::Given;
  if (timed()) return CostKind::Timed;
  // A preset's class rates are its own (checked against published throughput); a cluster
  // file's are what `pipelab calibrate` fitted.
  return device_.classes.given() && !preset_ ? CostKind::Calibrated : CostKind::Derived;
}

std::string CostSource::checked() const { return fmt::format("checked: {}", cost_validation(kind())); }

std::string CostSource::describe(const std::string& dtype) const {
  if (file_) return file_->source;
  if (!times_.empty()) return describe_timed();
  const LinkSpec& l = device_.link;
  return fmt::format(
      "derived{}: {:g} TFLOP/s{}, {}, {}, {:g} us per kernel and {:g} us per action, links {} Gbit/s and {:g} us{}; {}{}",
      device_.classes.given() ? " per operator class (the cluster's device.classes)" : "", device_.tflops,
      device_.convolution_tflops > 0 ? fmt::format(" ({:g} for convolutions, in TensorFloat-32)", device_.convolution_tflops)
                                     : "",
      memory_text(device_.memory_gbs), dtype, device_.launch_us, device_.action_us,
      l.gbps > 0 ? fmt::format("{:g}", l.gbps) : "unbounded", l.latency_us,
      l.devices_per_node > 0 && l.inter_gbps > 0
          ? fmt::format(" within nodes of {}, {:g} Gbit/s and {:g} us between", l.devices_per_node, l.inter_gbps,
                        l.inter_latency_us)
          : "",
      profile_.describe(), profile_.cached ? " (cached)" : "");
}

/// The header of costs timed here: the sizes, and how much slower two devices busy together
/// run at the smallest and the largest.
std::string CostSource::describe_timed() const {
  const std::vector<int> sizes = timed_sizes(small_, large_);
  std::string at;
  for (size_t i = 0; i < sizes.size(); ++i) {
    at += fmt::format("{}{}", i == 0 ? "" : i + 1 < sizes.size() ? ", " : " and ", sizes[i]);
  }
  std::string busy;
  if (!times_.busy_slowdown.empty()) {
    const SizeCurve& two = times_.busy_slowdown[0];
    busy = fmt::format("; two devices busy together run {:.2f}x slower at {} examples, {:.2f}x at {}", two.at(small_),
                       small_, two.at(large_), large_);
  }
  // How much the blocks' times were scaled to the model run as a stage runs it.
  const std::string chained =
      fmt::format("; the model run as a stage runs it took {:.2f}x its blocks' forward and {:.2f}x their backward at "
                  "{} examples ({:.2f}x and {:.2f}x at {}), which scale them",
                  times_.chain_forward.at(large_), times_.chain_backward.at(large_), large_,
                  times_.chain_forward.at(small_), times_.chain_backward.at(small_), small_);
  return fmt::format("timed here: each block at {} examples, {} intra-op thread(s) per device{}{}", at, times_.threads,
                     chained, busy);
}

std::string CostSource::memory_text(double gbs) {
  return gbs > 0 ? fmt::format("memory {:g} GB/s", gbs) : "memory bandwidth not modelled (no --memory-bw)";
}

/// The bytes each stage of `balance` holds of a tie that spans two stages.
void CostSource::add_tied_bytes(SimCosts& c, const std::vector<int>& balance) const {
  const auto stage_of = [&balance](size_t block) {
    size_t end = 0;
    for (size_t p = 0; p < balance.size(); ++p) {
      end += static_cast<size_t>(balance[p]);
      if (block < end) return p;
    }
    return balance.size() - 1;
  };
  for (const BlockTie& t : ties_) {
    const size_t a = stage_of(t.first), b = stage_of(t.second);
    if (a == b) continue;
    const double bytes = static_cast<double>(t.elements) * device_.weight_bytes;
    c.stages[a].tied_bytes += bytes;
    c.stages[b].tied_bytes += bytes;
  }
}

SimCosts CostSource::costs(int stages, double examples) const {
  if (file_) return costs_for({}, examples);
  if (stages > static_cast<int>(profile_.blocks.size())) {
    throw UserError(fmt::format("{} stages, but the model has {} blocks. Fix: use at most {} stages", stages,
                                profile_.blocks.size(), profile_.blocks.size()));
  }
  // The file's partition when it has this many stages, else the FLOPs-balanced cut.
  const Balance& given = e_.partition.balance;
  const std::vector<int> balance = given.kind == Balance::Kind::Counts && static_cast<int>(given.counts.size()) == stages
                                       ? given.counts
                                       : balance_by_weight(with_floor(block_flops()), stages);
  return costs_for(balance, examples);
}

SimCosts CostSource::costs_for(const std::vector<int>& balance, double examples) const {
  return costs_for(balance, examples, e_.compression);
}

SimCosts CostSource::costs_for(const std::vector<int>& balance, double examples,
                               const CompressionSection& compression) const {
  if (file_) {
    SimCosts c = file_->scaled_to(examples);
    const double bytes = c.dtype == "float64" ? 8 : c.dtype == "float32" || c.dtype.empty() ? 4 : 2;
    apply_compression(c, compression, bytes);
    return c;
  }
  SimCosts c = derive_costs(profile_.blocks, profile_.memory, balance, examples, device_, times_.empty() ? nullptr : &times_);
  c.source = times_.empty() ? "derived" : "timed here";
  c.sequence_length = sequence_length_;
  add_tied_bytes(c, balance);
  apply_compression(c, compression, device_.dtype_bytes);
  return c;
}

std::vector<double> CostSource::block_flops() const {
  std::vector<double> flops;
  for (const BlockProfile& b : profile_.blocks) flops.push_back(static_cast<double>(b.flops));
  return flops;
}

}  // namespace pipelab::sim
