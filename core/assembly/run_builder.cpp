/// The run builder (core/assembly/run_builder.h): data, plan, balance, stages and their wiring.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <set>
#include <thread>

#include <fmt/ranges.h>

#include "core/assembly/run_builder.h"
#include "core/assembly/run_checks.h"
#include "core/assembly/run_config.h"
#include "core/config/yaml_file.h"
#include "core/data/subset.h"
#include "core/device/device.h"
#include "core/experiment/plan_request.h"
#include "core/feed/feeds.h"
#include "core/feed/shadow_sync.h"
#include "core/io/safetensors.h"
#include "core/model/block_costs.h"
#include "core/records/state_dict.h"
#include "core/schedule/generators.h"
#include "core/schedule/lower.h"
#include "core/schedule/validate.h"
#include "core/scheme/replicas.h"
#include "core/util/names.h"

namespace pipelab {

int default_threads() {
  // OMP_NUM_THREADS when set (a sweep sets it for each of its runs); else half the cores.
  // LibTorch's default (every core) is fastest alone but collapses beside another busy
  // process: its OpenMP threads spin-wait, and on 2 cores two quickstarts with 2 threads
  // each kept 3-8% of their solo throughput, against 94-98% with 1 thread (which costs
  // 14% alone; tools/bench/bench_concurrent.sh, docs/executors.md, "Threads"). A passive OpenMP wait
  // policy was no cure: 3x slower alone.
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  const unsigned cores = std::thread::hardware_concurrency();
  return std::max(1, static_cast<int>(cores / 2));
}

/// The run's thread budget for this process: run.threads (or the default) shared among the
/// processes `pipelab launch` started on this machine (PIPELAB_LOCAL_PROCESSES). Two ranks of
/// 2 intra-op threads each on 2 cores spin against each other: an 8 x Linear(512) MLP under
/// GPipe trained at about 5,000 samples/s that way and 5,500 with 1 thread each.
int process_threads(int threads) {
  int processes = 1;
  if (const char* env = std::getenv("PIPELAB_LOCAL_PROCESSES")) processes = std::max(1, std::atoi(env));
  return std::max(1, threads / processes);
}

namespace {
/// run.devices, parsed: one for every stage, or one per device of the placement.
std::vector<c10::Device> run_devices(const Experiment& e, int stages, int replicas, const std::vector<int>& placement) {
  const RunOptions& run = e.run;
  const int device_count = placement.empty() ? 0 : *std::max_element(placement.begin(), placement.end()) + 1;
  if (run.devices.size() != 1 && static_cast<int>(run.devices.size()) != device_count) {
    e.source->fail("run.devices",
                   fmt::format("{} devices for {} stages{} placed on {} devices", run.devices.size(), stages,
                               replicas > 1 ? fmt::format(" x {} replicas", replicas) : "", device_count),
                   fmt::format("give one device for all stages or exactly {}", device_count));
  }
  std::vector<c10::Device> devices;
  for (const std::string& d : run.devices) {
    try {
      devices.push_back(device::parse(d));
    } catch (const UserError& err) {
      throw ConfigError(fmt::format("{}: run.devices: {}", e.source->where("run.devices"), err.what()));
    }
  }
  return devices;
}

/// Refuses a scheme the model or the precision cannot serve, before anything is built.
void check_scheme_fits(const Experiment& e, const Dataflow& dataflow) {
  const auto add_ons = e.scheme->add_ons();
  if (!dataflow.plain() && (add_ons->routes_own_gradients() || add_ons->prepares())) {
    e.source->fail("scheme.type",
                   fmt::format("scheme {} trains each stage on the one tensor it sends, but model {} sends several "
                               "between blocks (a skip connection, a mask or a second state)",
                               e.scheme->type(), e.model->type()),
                   "use a model whose blocks pass one tensor (mlp, cnn, resnet, ...) or another scheme");
  }
  if (e.run.amp == Amp::Fp16 && add_ons->routes_own_gradients()) {
    e.source->fail("run.amp",
                   fmt::format("scheme {} computes its gradients itself, which fp16's loss scaling does not reach",
                               e.scheme->type()),
                   "use run.amp: bf16 (no loss scaling needed) or none");
  }
  if (e.run.cuda_graphs && add_ons->routes_own_gradients()) {
    e.source->fail("run.cuda_graphs",
                   fmt::format("scheme {} computes its gradients itself from each forward's autograd graph, which a "
                               "captured forward does not keep",
                               e.scheme->type()),
                   "set run.cuda_graphs: false");
  }
}

}  // namespace

RunBuilder::RunBuilder(Experiment& experiment, bool resume)
    : e_(experiment), resume_(resume), p_(std::make_unique<RunParts>()) {}

std::unique_ptr<RunParts> RunBuilder::build() {
  const RunOptions& run = e_.run;
  at::set_num_threads(process_threads(run.threads > 0 ? run.threads : default_threads()));
  p_->dtype = run.dtype == RunOptions::Dtype::Float64 ? at::kDouble : at::kFloat;
  load_data();
  if (p_->data.spec.documents && !e_.model->reads_documents()) {
    e_.source->fail("dataset.collate",
                    fmt::format("batches of ragged text need a model that keeps attention within each document and "
                                "restarts positions there, which model {} does not",
                                e_.model->type()),
                    "use model type llama, or transformer with head: lm; or leave collate out (fixed windows)");
  }
  p_->def = e_.model->define(p_->data.spec);
  try {
    p_->dataflow = dataflow(p_->def, e_.model->type());
  } catch (const UserError& err) {
    // A model's block list is code, but the file chose it: name both.
    throw ConfigError(fmt::format("{}: {}", e_.source->where("model.type"), err.what()));
  }
  if (e_.gradients.tied_gradients_given && p_->def.ties.empty()) {
    e_.source->fail("optimizer.tied_gradients", "tied_gradients does nothing unless the model ties weights",
                    "remove tied_gradients, or tie the model's weights (e.g. model.tie_embeddings: true)");
  }
  build_stages();
  start_shadow();
  make_loaders();
  check_schedules(e_, *p_);
  check_model_takes_data(e_, *p_);
  check_processes_agree(e_, resolved_config(e_, *p_));
  return std::move(p_);
}

void RunBuilder::load_data() {
  p_->data = e_.dataset->load(e_.data_context());
  // The same subset whatever run.seed (core/data/subset.h): seeds compare on equal data.
  const int64_t train = p_->data.train->size(), test = p_->data.test->size();
  p_->data.train = subset(p_->data.train, e_.limits.limit, 0);
  p_->data.test = subset(p_->data.test, e_.limits.test_limit, 1);
  std::vector<std::string> parts;
  if (e_.limits.limit > 0) parts.push_back(fmt::format("training on {} of {} examples", p_->data.train->size(), train));
  if (e_.limits.test_limit > 0) parts.push_back(fmt::format("testing on {} of {}", p_->data.test->size(), test));
  if (e_.run.max_steps > 0) parts.push_back(fmt::format("at most {} training steps (run.max_steps)", e_.run.max_steps));
  if (!parts.empty()) p_->limits_report = "limits: " + join(parts, ", ");
}

void RunBuilder::make_loaders() {
  const RunOptions& run = e_.run;
  const int64_t spe = std::max<int64_t>(p_->data.train->size() / run.batch_size, 0);
  if (spe == 0) {
    e_.source->fail("run.batch_size",
                    fmt::format("the training set has {} examples, fewer than one batch of {}",
                                p_->data.train->size(), run.batch_size),
                    "use a smaller batch size or more training examples");
  }
  LoaderOptions train{run.batch_size, true, true, static_cast<uint64_t>(run.seed), run.loader};
  LoaderOptions test{run.eval_batch_size.value_or(run.batch_size), false, false, 0, run.loader};
  test.across_epochs = false;  // each evaluation starts its one pass again
  train.pin = test.pin = run.loader.pin_memory == PrefetchOptions::Pin::On ||
                         (run.loader.pin_memory == PrefetchOptions::Pin::Auto && run.any_cuda_device());
  p_->train = std::make_unique<DataLoader>(p_->data.train, train);
  p_->test = std::make_unique<DataLoader>(p_->data.test, test);
  // The stages' learning-rate schedules read it (they point at the parts, which stay put).
  const Experiment* e = &e_;
  const int64_t per_epoch = p_->train->batches();
  p_->lr_at = [e, per_epoch](int64_t step) {
    return e->optimizer->base_lr() * e->lr_schedule->factor_at_step(step, per_epoch, e->run.epochs);
  };
}

void RunBuilder::build_stages() {
  const RunOptions& run = e_.run;
  // The plan's topology and placement now; its sync again once the balance places the ties.
  p_->plan = RunPlan::compile(plan_request(std::nullopt));
  const uint64_t seed = static_cast<uint64_t>(run.seed);
  check_scheme_fits(e_, p_->dataflow);
  if (e_.run.max_steps > 0 && !p_->plan.stops_at_steps()) {
    e_.source->fail("run.max_steps",
                    fmt::format("scheme {} never flushes its pipeline, so its run cannot stop at a step count",
                                e_.scheme->type()),
                    "count its run in epochs (run.epochs), on a smaller training set (dataset.limit)");
  }
  const auto build_all = [&](uint64_t from) {
    std::vector<Block> blocks;
    for (size_t i = 0; i < p_->def.blocks.size(); ++i) blocks.push_back(build_block(p_->def, i, from));
    return blocks;
  };
  check_model_fits();
  std::vector<Block> blocks = build_all(seed);
  check_offload_blocks(blocks);
  // The scheme's placement puts stage r on device placement[r]: one thread or process each,
  // and run.devices[placement[r]] when several devices are listed. Replica k's copy of the
  // pipeline takes the next devices (core/scheme/replicas.h).
  const std::vector<int>& placement = p_->plan.placement();
  const std::vector<c10::Device> devices = run_devices(e_, p_->plan.stages(), p_->plan.replicas(), placement);
  // A multi-process executor joins its process group here (it needs only the placement),
  // so that the processes can agree on a measured balance.
  e_.executor->world().attach(placement);
  p_->balance = settle_balance(blocks, devices.front());
  check_offload_block_stages();
  const auto topology = e_.scheme->topology();
  for (int r = 0; r < p_->plan.copies(); ++r) {
    // Every replica starts from the same weights, the same blocks under the same seeds,
    // unless the scheme's topology draws them apart (ReplicaTopology::replica_seed).
    build_replica(r, r == 0 ? std::move(blocks) : build_all(topology->replica_seed(r, seed)), devices);
  }
  const auto add_ons = e_.scheme->add_ons();
  if (add_ons->prepares()) prepare_stages(*add_ons);
  load_initial_weights();
  tie_parameters();
  wire_stages(*add_ons);
  connect_gradients();
  connect_codecs();
}

std::vector<int> RunBuilder::settle_balance(std::vector<Block>& blocks, c10::Device device) const {
  const int stages = p_->plan.stages();
  // A scheme that fixes its own stage count (e.g. `single`) takes the whole model.
  if (stages != e_.partition.stages) return balance_by_weight(std::vector<double>(blocks.size(), 1.0), stages);
  // Measured balances run the blocks over one micro-batch of real training examples.
  const auto costs = [&](Balance::Kind kind) {
    if (kind == Balance::Kind::Params) return block_params(blocks);
    // One unit of the step, all replicas' shares together (a flushed mini-batch's micro-batch).
    const StepShape step = p_->plan.step(e_.run.batch_size);
    const double examples = std::ceil(step.examples_per_micro_batch * p_->plan.replicas() - 1e-9);
    at::Tensor x = p_->sample_inputs(std::max<int64_t>(1, static_cast<int64_t>(examples)));
    if (x.is_floating_point()) x = x.to(at::kFloat);  // the blocks are float32 until the stages are made
    try {
      if (kind == Balance::Kind::Time) return block_seconds(blocks, x, device);
      return kind == Balance::Kind::Flops ? block_flops(blocks, x) : block_memory(blocks, x);
    } catch (const c10::Error& err) {
      model_data_mismatch(e_, p_->data.spec, err);
    }
  };
  std::vector<int> balance = resolve_balance(e_.partition.balance, stages, static_cast<int>(blocks.size()), costs,
                                             p_->def.named_balances, *e_.source);
  if (e_.partition.balance.kind == Balance::Kind::Time) balance = settled_time_balance(std::move(balance));
  return balance;
}

void RunBuilder::build_replica(int r, std::vector<Block> blocks, const std::vector<c10::Device>& devices) {
  const RunOptions& run = e_.run;
  const int stages = p_->plan.stages();
  size_t next = 0;
  for (int p = 0; p < stages; ++p) {
    const size_t first = next;
    next += static_cast<size_t>(p_->balance[static_cast<size_t>(p)]);
    // Stages are numbered replica by replica (core/schedule/stage_layout.h); a replicated
    // stage's row r holds only the stages with more than r replicas.
    const int id = p_->plan.layout().stage(p, r);  // the default layout: stage p (replica 0 only)
    if (id < 0) continue;
    PIPELAB_ASSERT(static_cast<size_t>(id) == p_->stages.size(), "stage ({}, {}) built as {} of {}", p, r, p_->stages.size(),
                   id);
    StageSpec spec;
    spec.index = p;
    spec.count = stages;
    spec.replica = r;
    spec.first_block = first;
    spec.inputs = p_->dataflow.live[first];
    for (size_t k = first; k < next; ++k) spec.blocks.push_back(std::move(blocks[k]));
    spec.outputs = p_->dataflow.live[next];
    spec.loss = p + 1 == stages ? p_->def.loss : nullptr;
    spec.device =
        devices.size() == 1 ? devices[0] : devices[static_cast<size_t>(p_->plan.placement()[static_cast<size_t>(id)])];
    spec.seed = static_cast<uint64_t>(run.seed);
    spec.precision = {run.amp, run.loss_scale};
    spec.channels_last = run.channels_last;
    spec.cuda_graphs = run.cuda_graphs;
    spec.offload_blocks = e_.partition.offload.blocks;
    auto stage = std::make_unique<Stage>(std::move(spec));
    if (p_->dtype != at::kFloat) stage->module().to(p_->dtype);
    p_->stages.push_back(std::move(stage));
  }
}

void RunBuilder::wire_stages(const StageAddOns& add_ons) {
  for (const auto& stage : p_->stages) {
    Stage& s = *stage;
    s.set_confusion(!p_->data.spec.metric.empty() && s.is_last());
    s.set_optimizer(e_.optimizer->make_named(s.parameters(), s.parameter_names()));
    // PipeDream's replicated stages: stage p's rate is lr R_p / R_0 (its runtime's
    // get_adjusted_learning_rate), on the mean of its replicas' gradients.
    const std::vector<int>& counts = p_->plan.layout().uniform() ? std::vector<int>{} : p_->plan.layout().counts();
    const double factor = counts.empty() ? 1.0 : static_cast<double>(counts[static_cast<size_t>(s.index())]) / counts[0];
    s.set_lr_schedule([parts = p_.get(), factor](int64_t step) { return parts->lr_at(step) * factor; });
    p_->policies.push_back(e_.scheme->make_policy(s));
    p_->routes.push_back(add_ons.route(s));
    StageSlot slot;
    slot.stage = &s;
    slot.policy = p_->policies.back().get();
    slot.route = p_->routes.back().get();
    slot.recompute = p_->plan.recomputes(s.index());
    p_->slots.push_back(slot);
  }
}

void RunBuilder::connect_codecs() {
  if (!e_.compression.any()) return;
  if (p_->data.spec.documents && e_.compression.needs_ids()) {
    // AQ-SGD keeps each example's last message, whose length ragged micro-batches change.
    e_.source->fail("compression",
                    "a codec with per-example state (aq_sgd) keeps each example's message at one shape, but ragged "
                    "text's micro-batches differ in length",
                    "use a stateless codec (topk, uniform, fixpoint, cast), or dataset.collate: windows");
  }
  const CodecRun run{p_->data.train->size(), e_.run.output + "/codec_cache"};
  // The plan has checked the section against its schedules.
  p_->codecs = std::make_unique<BoundaryCodecs>(e_.compression, p_->plan.codec_positions(), p_->plan.codec_position(), run);
  for (StageSlot& slot : p_->slots) slot.codecs = p_->codecs.get();
}

void RunBuilder::prepare_stages(const StageAddOns& add_ons) {
  // Each stage's output shape from a dry forward of two zero examples in eval mode (so
  // that no batch-norm statistic moves).
  std::vector<int64_t> shape{2};
  shape.insert(shape.end(), p_->data.spec.input_shape.begin(), p_->data.spec.input_shape.end());
  at::Tensor x = at::zeros(shape, at::TensorOptions().dtype(p_->data.spec.integer_input ? at::kLong : p_->dtype));
  for (const auto& stage : p_->stages) {
    if (stage->is_last()) {
      std::vector<int64_t> logits = p_->data.spec.target_shape;  // a prediction per target
      logits.push_back(p_->data.spec.classes);
      add_ons.prepare(*stage, logits, p_->data.spec);
      continue;
    }
    stage->set_training(false);
    x = stage->evaluate(x.to(stage->device())).activation();
    add_ons.prepare(*stage, x.sizes().slice(1).vec(), p_->data.spec);
  }
}

std::vector<int> RunBuilder::settled_time_balance(std::vector<int> measured) const {
  // Timings differ from one measurement to the next, but a run must be cut the same way
  // everywhere: a resumed run keeps the split it started with (its config.yaml), and in a
  // multi-process run every process takes process 0's split.
  if (resume_) {
    try {
      const YAML::Node saved = load_yaml_file(e_.run.output + "/config.yaml")["partition"]["balance"];
      std::vector<int> counts = saved.as<std::vector<int>>();
      const bool fits = counts.size() == measured.size() &&
                        std::all_of(counts.begin(), counts.end(), [](int n) { return n > 0; }) &&
                        std::accumulate(counts.begin(), counts.end(), 0) ==
                            std::accumulate(measured.begin(), measured.end(), 0);
      if (fits) {
        return counts;
      }
    } catch (const YAML::Exception&) {
      // No usable saved split: the resume's own check reports the file.
    }
    return measured;
  }
  const std::vector<std::vector<int64_t>> all =
      gather_values(e_.executor->world(), std::vector<int64_t>(measured.begin(), measured.end()));
  return std::vector<int>(all.front().begin(), all.front().end());
}


}  // namespace pipelab
