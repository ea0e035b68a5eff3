#include "tools/simulate/derive.h"

#include <algorithm>
#include <numeric>

#include "core/util/error.h"

namespace pipelab::sim {
namespace {

constexpr double kNothing = 1e-9;  ///< seconds of an action that does nothing

double elements(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), 1.0, [](double a, int64_t b) { return a * static_cast<double>(b); });
}


/// The bytes per element of what the blocks were measured in (float32) against the run's:
/// activation-sized bytes (growing with the micro-batch) are in the compute dtype, weight-sized
/// ones (a backward's gradient temporaries, an update's) in the master weights'; under
/// autocast each forward also keeps `cast` bytes per block (BlockMemory::retained_fixed).
struct RunBytes {
  double activations = 1, weights = 1;
  std::vector<double> cast;
  /// A rise measured in float32 at `examples` examples, in the run's bytes.
  double of(const Affine& rise, double examples) const {
    return rise.fixed * weights + rise.per_example * examples * activations;
  }
};

/// How the profile's bytes become the run's.
RunBytes run_bytes(const std::vector<BlockProfile>& blocks, const BlockMemory& memory, const DeviceSpec& device) {
  // Measured under the run's autocast (ShapeAutocast): its bytes as they are.
  if (!device.autocast.empty() && memory.precision == device.autocast) {
    std::vector<double> cast = memory.retained_fixed;
    cast.resize(blocks.size(), 0.0);
    return RunBytes{1, 1, cast};
  }
  // Measured in float32 (or estimated): activations in the compute dtype, weight-sized bytes
  // in the master weights'. The weights' casts under autocast are known only from a profile
  // measured under it.
  return RunBytes{device.dtype_bytes / 4, device.weight_bytes / 4, std::vector<double>(blocks.size(), 0.0)};
}

/// Bytes of `examples` examples crossing a cut after block `b`: the floating tensors as the
/// run holds them (measured under its autocast, BlockMemory::cut_per_example; else the
/// profile's float32 in the device's dtype), the others (ids, masks) as profiled; for the
/// gradients only the floating ones.
double cut_bytes(const std::vector<BlockProfile>& blocks, const BlockMemory& memory, size_t b, const DeviceSpec& device,
                 const RunBytes& run, double examples, bool gradients) {
  double floating = 0, other = 0;
  for (const TensorProfile& t : blocks.at(b).live) (t.floating ? floating : other) += static_cast<double>(t.bytes);
  floating = b < memory.cut_per_example.size() ? memory.cut_per_example[b] * run.activations
                                               : floating / 4 * device.dtype_bytes;
  return (floating + (gradients ? 0.0 : other)) * examples;
}

/// The stage's forward and backward transients from its blocks' rises: a block's forward
/// runs above what the blocks before it keep; its backward runs after the blocks after it
/// have freed theirs.
void add_transients(StageCosts& k, const BlockMemory& memory, size_t first, size_t count, double examples,
                    const RunBytes& run) {
  if (memory.forward_rise.empty()) return;
  const auto kept_by = [&](size_t b) { return memory.retained_per_example[b] * run.activations * examples + run.cast[b]; };
  double below = 0, forward = 0;
  for (size_t b = first; b < first + count; ++b) {
    forward = std::max(forward, below + run.cast[b] + run.of(memory.forward_rise.at(b), examples));
    below += kept_by(b);
  }
  double freed = 0, backward = 0;
  for (size_t b = first + count; b-- > first;) {
    backward = std::max(backward, run.of(memory.backward_rise.at(b), examples) - freed);
    freed += kept_by(b);
  }
  k.transient_bytes[ActionKind::Forward] = forward;
  k.transient_bytes[ActionKind::Backward] = backward;
  // A split backward: its I runs the blocks last to first, above what the later blocks' Is
  // keep for their Ws; its W, each block's weight products in turn. The first stage's I has
  // no input gradient to make: it runs nothing and keeps nothing (its W is the whole backward).
  if (memory.input_backward_kept.size() == memory.forward_rise.size()) {
    double kept = 0, input = 0, weight = 0;
    for (size_t b = first + count; b-- > first;) {
      input = std::max(input, run.of(memory.input_backward_rise.at(b), examples) + kept);
      weight = std::max(weight, run.of(memory.weight_backward_rise.at(b), examples));
      kept += std::max(0.0, run.of(memory.input_backward_kept[b], examples));
    }
    k.backward_input_kept_bytes = first > 0 ? kept : 0;
    k.transient_bytes[ActionKind::BackwardInput] = first > 0 ? input : 0;
    k.transient_bytes[ActionKind::BackwardWeight] = first > 0 ? weight : backward;
  }
  // One step over the stage's tensors in turn: the largest block's temporaries, in the
  // master weights' dtype.
  for (size_t b = first; b < first + count && b < memory.update_rise.size(); ++b) {
    k.transient_bytes[ActionKind::Update] =
        std::max(k.transient_bytes[ActionKind::Update], memory.update_rise[b] * run.weights);
  }
  k.recompute_in_transient = false;
}

/// The forward plus backward seconds of blocks [first, first + count) at each size they were
/// timed at (every block at the same sizes).
SizeCurve timed_stage_seconds(const BlockTimes& times, size_t first, size_t count) {
  SizeCurve out;
  out.examples = times.forward.at(first).examples;
  out.values.assign(out.examples.size(), 0.0);
  for (size_t b = first; b < first + count; ++b) {
    for (size_t i = 0; i < out.examples.size(); ++i) {
      out.values[i] += times.forward[b].values.at(i) + times.backward[b].values.at(i);
    }
  }
  return out;
}

}  // namespace

BlockMemory estimated_block_memory(const std::vector<BlockProfile>& blocks) {
  BlockMemory m;
  for (const BlockProfile& b : blocks) m.retained_per_example.push_back(2 * 4 * elements(b.output_shape));
  return m;
}

SimCosts derive_costs(const std::vector<BlockProfile>& blocks, const BlockMemory& memory, const std::vector<int>& balance,
                      double examples, const DeviceSpec& device, const BlockTimes* times) {
  PIPELAB_ASSERT(device.tflops > 0 || times, "derive_costs needs the device's FLOP rate or timed blocks");
  PIPELAB_ASSERT(!times || times->forward.size() == blocks.size(), "one timing per block");
  PIPELAB_ASSERT(memory.retained_per_example.size() == blocks.size(), "one retained size per block");
  const double rate = device.tflops * 1e12;
  const double bw = device.memory_gbs * 1e9;
  const RunBytes run = run_bytes(blocks, memory, device);
  const auto roofline = [&](double flops, double bytes) { return std::max(flops / rate, bw > 0 ? bytes / bw : 0.0); };
  SimCosts c;
  c.link = device.link;
  c.micro_batch_size = examples;
  if (times) c.busy_slowdown = times->busy_slowdown_at(examples);
  c.format = "pipelab-stage-costs";
  size_t first = 0;
  for (size_t s = 0; s < balance.size(); ++s) {
    StageCosts k;
    k.stage = k.device = static_cast<int>(s);
    double params = 0, update = 0, state = 0, update_flops = 0, update_kernels = 0;
    for (size_t b = first; b < first + static_cast<size_t>(balance[s]); ++b) {
      const BlockProfile& block = blocks.at(b);
      const double in = b == 0 ? 0 : elements(blocks[b - 1].output_shape);
      const double out = elements(block.output_shape);
      const double weight_bytes = static_cast<double>(block.parameters) * device.weight_bytes;
      // Forward: read the input and the weights, write the output. The weight gradient (W)
      // computes the FLOPs of the operators that read a weight again; the input gradient (I)
      // those once and an operator of two activations (attention's scores) twice, one
      // product per operand.
      const double traffic = (in + out) * device.dtype_bytes * examples;
      const double flops = static_cast<double>(block.flops) * examples;
      const double weight_flops = static_cast<double>(block.weight_flops) * examples;
      const double input_flops = 2 * flops - weight_flops;
      if (times) {
        // A first stage's I has no inputs to take gradients of; its W is the whole backward
        // (core/stage/stage.cpp). Elsewhere I and W are what each was timed at.
        const double backward = times->backward[b].at(examples);
        k.seconds[ActionKind::Forward] += times->forward[b].at(examples);
        k.seconds[ActionKind::Backward] += backward;
        // (A nanosecond, not 0: a kind without a figure of its own costs half a B.)
        k.seconds[ActionKind::BackwardInput] += s == 0 ? kNothing : times->input_backward[b].at(examples);
        k.seconds[ActionKind::BackwardWeight] += s == 0 ? backward : times->weight_backward[b].at(examples);
        update += times->update[b];
        k.weight_copy_seconds += times->weight_copy.at(b);
      } else {
        // Per operator class where the cluster gives rates (tools/simulate/class_rates.h), else
        // one roofline per block; each kernel's fixed host cost on top: a backward runs about
        // two per forward kernel, one for the input's gradient and one for the weights'.
        const ClassSeconds t =
            device.classes.given()
                ? class_seconds(block, examples, device.classes,
                                ClassDevice{rate, device.convolution_tflops * 1e12, bw, device.dtype_bytes / 4})
                : ClassSeconds{roofline(flops, traffic + weight_bytes), roofline(input_flops, 2 * traffic + weight_bytes),
                               roofline(weight_flops, traffic + 2 * weight_bytes)};
        const double launches = static_cast<double>(block.kernels) * device.launch_us * 1e-6;
        k.seconds[ActionKind::Forward] += t.forward + launches;
        k.seconds[ActionKind::BackwardInput] += t.input_backward + launches;
        k.seconds[ActionKind::BackwardWeight] += t.weight_backward + launches;
      }
      k.retained_bytes += memory.retained_per_example[b] * run.activations * examples;
      k.retained_fixed_bytes += run.cast[b];
      params += static_cast<double>(block.parameters);
      if (b < memory.optimizer_state.size()) state += memory.optimizer_state[b];
      if (b < memory.update_flops.size()) update_flops += memory.update_flops[b];
      if (b < memory.update_kernels.size()) update_kernels += memory.update_kernels[b];
    }
    if (!times) {
      // Each action's own host work; a whole backward (I and W at once) pays it once.
      const double action = device.action_us * 1e-6;
      k.seconds[ActionKind::Forward] += action;
      k.seconds[ActionKind::BackwardInput] += action / 2;
      k.seconds[ActionKind::BackwardWeight] += action / 2;
    }
    if (times) k.timed_seconds = timed_stage_seconds(*times, first, static_cast<size_t>(balance[s]));
    add_transients(k, memory, first, static_cast<size_t>(balance[s]), examples, run);
    const size_t last = first + static_cast<size_t>(balance[s]) - 1;
    if (!times) k.seconds[ActionKind::Backward] = k.seconds[ActionKind::BackwardInput] + k.seconds[ActionKind::BackwardWeight];
    k.activation_bytes = s + 1 < balance.size() ? cut_bytes(blocks, memory, last, device, run, examples, false) : 0;
    k.output_bytes = k.activation_bytes;
    k.gradient_bytes = s > 0 ? cut_bytes(blocks, memory, first - 1, device, run, examples, true) : 0;
    k.parameter_bytes = params * device.weight_bytes;
    const bool per_parameter = !memory.optimizer_state.empty();
    k.optimizer_bytes = (per_parameter ? state : params * device.optimizer_states) * device.weight_bytes;
    // A copy reads the weights and writes them once.
    if (!times && bw > 0) k.weight_copy_seconds = 2 * k.parameter_bytes / bw;
    // The step reads weights and gradient, writes weights, and reads and writes each state.
    const double update_bw = bw * (device.classes.update > 0 ? device.classes.update : 1.0);
    // Its matrix products (basis rotation's rotations and refreshes) at the weights'
    // precision's rate, as the GEMMs reach it.
    const double gemm = device.classes.forward.compute[static_cast<size_t>(OpClass::Gemm)];
    const double update_rate = (device.update_tflops > 0 ? device.update_tflops * 1e12 : rate) * (gemm > 0 ? gemm : 1);
    k.seconds[ActionKind::Update] = times ? update
                                    : (bw > 0 ? (3 * k.parameter_bytes + 2 * k.optimizer_bytes) / update_bw : 0) +
                                          (update_rate > 0 ? update_flops / update_rate : 0) +
                                          update_kernels * device.launch_us * 1e-6 + device.action_us * 1e-6;
    k.prediction_seconds = k.seconds[ActionKind::Update];
    c.stages.push_back(k);
    first += static_cast<size_t>(balance[s]);
  }
  PIPELAB_ASSERT(first == blocks.size(), "balance covers {} of {} blocks", first, blocks.size());
  return c;
}

void optimizer_step_costs(const std::vector<BlockProfile>& blocks, const OptimizerFactory& optimizer,
                          BlockMemory& memory) {
  memory.optimizer_state.assign(blocks.size(), 0);
  memory.update_flops.assign(blocks.size(), 0);
  memory.update_kernels.assign(blocks.size(), 0);
  for (size_t b = 0; b < blocks.size(); ++b) {
    const BlockProfile& block = blocks[b];
    for (size_t i = 0; i < block.parameter_sizes.size() && i < block.parameter_shapes.size(); ++i) {
      const StepCost c = optimizer.step_cost(block.name + "." + block.parameter_sizes[i].first, block.parameter_shapes[i]);
      memory.optimizer_state[b] += c.state_elements;
      memory.update_flops[b] += c.flops;
      memory.update_kernels[b] += c.kernels;
    }
  }
}

}  // namespace pipelab::sim
