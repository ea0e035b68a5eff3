/// Runner construction: everything is built and checked before anything is written.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <set>
#include <thread>

#include <fmt/ranges.h>

#include "core/config/yaml_file.h"
#include "core/device/device.h"
#include "core/io/safetensors.h"
#include "core/model/block_costs.h"
#include "core/schedule/generators.h"
#include "core/schedule/lower.h"
#include "core/schedule/validate.h"
#include "core/scheme/replicas.h"
#include "core/train/feeds.h"
#include "core/train/runner.h"
#include "core/train/shadow_sync.h"
#include "core/train/state_dict.h"

namespace pipelab {

int default_threads() {
  // OMP_NUM_THREADS when set (a sweep sets it for each of its runs); else half the cores.
  // LibTorch's default (every core) is fastest alone but collapses beside another busy
  // process: its OpenMP threads spin-wait, and on 2 cores two quickstarts with 2 threads
  // each kept 3-8% of their solo throughput, against 94-98% with 1 thread (which costs
  // 14% alone; tools/bench/bench_concurrent.sh, README "Threads"). A passive OpenMP wait
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

Runner::Runner(Experiment& experiment, RunnerOptions options) : e_(experiment), options_(options) {
  const RunOptions& run = e_.run;
  at::set_num_threads(process_threads(run.threads > 0 ? run.threads : default_threads()));
  dtype_ = run.dtype == RunOptions::Dtype::Float64 ? at::kDouble : at::kFloat;
  DataContext context;
  context.seed = static_cast<uint64_t>(run.seed);
  const char* env = std::getenv("PIPELAB_DATA_DIR");
  context.data_dir = run.data_dir ? *run.data_dir : env ? env : "data";
  data_ = e_.dataset->load(context);
  limit_data();
  def_ = e_.model->define(data_.spec);
  try {
    dataflow_ = dataflow(def_, e_.model->type());
  } catch (const UserError& err) {
    // A model's block list is code, but the file chose it: name both.
    throw ConfigError(fmt::format("{}: {}", e_.source->where("model.type"), err.what()));
  }
  if (e_.gradients.tied_gradients_given && def_.ties.empty()) {
    e_.source->fail("optimizer.tied_gradients", "tied_gradients does nothing unless the model ties weights",
                    "remove tied_gradients, or tie the model's weights (e.g. model.tie_embeddings: true)");
  }
  build_stages();
  start_shadow();
  const int64_t spe = std::max<int64_t>(data_.train->size() / run.batch_size, 0);
  if (spe == 0) {
    e_.source->fail("run.batch_size",
                    fmt::format("the training set has {} examples, fewer than one batch of {}", data_.train->size(),
                                run.batch_size),
                    "use a smaller batch size or more training examples");
  }
  train_ = std::make_unique<DataLoader>(
      data_.train, LoaderOptions{run.batch_size, true, true, static_cast<uint64_t>(run.seed), run.loader});
  test_ = std::make_unique<DataLoader>(
      data_.test, LoaderOptions{run.eval_batch_size.value_or(run.batch_size), false, false, 0, run.loader});
  check_schedules();
  check_model_takes_data();
  check_processes_agree();
}

Runner::~Runner() = default;  // here, where ShadowSync is complete

namespace {

/// Key paths where two YAML trees differ ("optimizer.lr", "model.sizes[2]").
void differences(const YAML::Node& a, const YAML::Node& b, const std::string& path, std::vector<std::string>& out) {
  if (a.Type() != b.Type()) {
    out.push_back(path);
  } else if (a.IsMap()) {
    std::set<std::string> keys;
    for (const auto& kv : a) keys.insert(kv.first.as<std::string>());
    for (const auto& kv : b) keys.insert(kv.first.as<std::string>());
    for (const std::string& k : keys) differences(a[k], b[k], path.empty() ? k : path + "." + k, out);
  } else if (a.IsSequence()) {
    if (a.size() != b.size()) {
      out.push_back(path);
    } else {
      for (size_t i = 0; i < a.size(); ++i) differences(a[i], b[i], fmt::format("{}[{}]", path, i), out);
    }
  } else if (a.IsScalar() && a.Scalar() != b.Scalar()) {
    out.push_back(path);
  }
}

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
}

}  // namespace

std::vector<NameRule> Runner::name_rules() const {
  const TensorNames& names = e_.init.names;
  if (names.preset == "none") return names.rules;
  const auto it = def_.published_names.find(names.preset);
  if (it == def_.published_names.end()) {
    std::vector<std::string> known;
    for (const auto& kv : def_.published_names) known.push_back(kv.first);
    e_.source->fail("init.names",
                    fmt::format("model {} has no {} names{}", e_.model->type(), names.preset,
                                known.empty() ? "" : fmt::format(" (it has {})", fmt::join(known, ", "))),
                    "give the renaming as rules {pattern: rewrite, ...}, or none");
  }
  return it->second;
}

void Runner::load_initial_weights() {
  if (!e_.init.from) return;
  const std::string& path = *e_.init.from;
  if (!std::filesystem::is_regular_file(path)) {
    e_.source->fail("init.from", fmt::format("file '{}' not found", path),
                    "give the path of a .pt file written by torch.save(model.state_dict(), path) or of a "
                    ".safetensors file");
  }
  std::vector<std::string> dropped;
  const TensorDict state = rename_tensors(load_weights(path), name_rules(), path, &dropped);
  if (state.empty() && !dropped.empty()) {
    e_.source->fail("init.names",
                    fmt::format("its rules drop every one of the {} entries of {} (an empty rewrite drops a tensor)",
                                dropped.size(), path),
                    "give each rule that should keep tensors a rewrite, e.g. 'features\\.(.*)': 'body.\\1'");
  }
  for (int r = 0; r < plan_.copies(); ++r) {
    // Messages about the file's names say when they are init.names' rewrites, not the file's own.
    const std::string label = name_rules().empty() ? path : path + " (its names as init.names' rules rewrote them)";
    LoadReport report = load_model_state(replica_stages(r), state, e_.init.strict, label);
    report.dropped = dropped;
    if (r == 0) init_report_ = report.describe(path);
  }
}

void Runner::check_processes_agree() const {
  YAML::Node mine = resolved_config();
  mine.remove("pipelab");
  mine["run"].remove("executor");
  YAML::Emitter emitter;
  emitter << mine;
  const std::string text = emitter.c_str();
  const std::vector<std::string> all = e_.executor->world().gather_text("config", text);
  for (size_t p = 0; p < all.size(); ++p) {
    if (all[p] == text) continue;
    std::vector<std::string> paths;
    differences(mine, YAML::Load(all[p]), "", paths);
    throw UserError(fmt::format("{}: process {} runs another configuration than this one ({}): {} differ. Fix: start "
                                "every rank with the same file and the same --set values.",
                                e_.source->file(), p, e_.executor->world().process_name(), fmt::join(paths, ", ")));
  }
}

void Runner::build_stages() {
  const RunOptions& run = e_.run;
  const int requested = e_.partition.stages;
  // The plan's topology and placement now; its sync again once the balance places the ties.
  plan_ = RunPlan::compile(plan_request(std::nullopt));
  const int stages = plan_.stages();
  const int replicas = plan_.replicas();
  const uint64_t seed = static_cast<uint64_t>(run.seed);
  check_scheme_fits(e_, dataflow_);
  const auto build_all = [&](uint64_t from) {
    std::vector<Block> blocks;
    for (size_t i = 0; i < def_.blocks.size(); ++i) blocks.push_back(build_block(def_, i, from));
    return blocks;
  };
  std::vector<Block> blocks = build_all(seed);
  // The scheme's placement puts stage r on device placement[r]: one thread or process each,
  // and run.devices[placement[r]] when several devices are listed. Replica k's copy of the
  // pipeline takes the next devices (core/scheme/replicas.h).
  const std::vector<int>& placement = plan_.placement();
  const std::vector<c10::Device> devices = run_devices(e_, stages, replicas, placement);
  // Measured balances run the blocks over one micro-batch of real training examples.
  const auto costs = [&](Balance::Kind kind) {
    if (kind == Balance::Kind::Params) return block_params(blocks);
    const int m = e_.scheme->micro_batches();
    at::Tensor x = sample_inputs(std::max<int64_t>(1, (run.batch_size + m - 1) / m));
    if (x.is_floating_point()) x = x.to(at::kFloat);  // the blocks are float32 until the stages are made
    try {
      if (kind == Balance::Kind::Time) return block_seconds(blocks, x, devices.front());
      return kind == Balance::Kind::Flops ? block_flops(blocks, x) : block_memory(blocks, x);
    } catch (const c10::Error& err) {
      model_data_mismatch(err);
    }
  };
  // A multi-process executor joins its process group here (it needs only the placement),
  // so that the processes can agree on a measured balance below.
  e_.executor->world().attach(placement);
  if (stages == requested) {
    balance_ = resolve_balance(e_.partition.balance, stages, static_cast<int>(blocks.size()), costs,
                               def_.named_balances, *e_.source);
    if (e_.partition.balance.kind == Balance::Kind::Time) balance_ = settled_time_balance(std::move(balance_));
  } else {
    // A scheme that fixes its own stage count (e.g. `single`) takes the whole model.
    balance_ = balance_by_weight(std::vector<double>(blocks.size(), 1.0), stages);
  }
  const auto topology = e_.scheme->topology();
  for (int r = 0; r < plan_.copies(); ++r) {
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

void Runner::wire_stages(const StageAddOns& add_ons) {
  for (const auto& stage : stages_) {
    Stage& s = *stage;
    s.set_confusion(!data_.spec.metric.empty() && s.is_last());
    s.set_optimizer(e_.optimizer->make(s.parameters()));
    // PipeDream's replicated stages: stage p's rate is lr R_p / R_0 (its runtime's
    // get_adjusted_learning_rate), on the mean of its replicas' gradients.
    const std::vector<int>& counts = plan_.layout().uniform() ? std::vector<int>{} : plan_.layout().counts();
    const double factor = counts.empty() ? 1.0 : static_cast<double>(counts[static_cast<size_t>(s.index())]) / counts[0];
    s.set_lr_schedule([this, factor](int64_t step) { return lr_at(step) * factor; });
    policies_.push_back(e_.scheme->make_policy(s));
    routes_.push_back(add_ons.route(s));
    StageSlot slot;
    slot.stage = &s;
    slot.policy = policies_.back().get();
    slot.route = routes_.back().get();
    slots_.push_back(slot);
  }
}

void Runner::connect_codecs() {
  if (!e_.compression.any()) return;
  const CodecRun run{data_.train->size(), e_.run.output + "/codec_cache"};
  // The plan has checked the section against its schedules.
  codecs_ = std::make_unique<BoundaryCodecs>(e_.compression, plan_.codec_positions(), plan_.codec_position(), run);
  for (StageSlot& slot : slots_) slot.codecs = codecs_.get();
}

void Runner::prepare_stages(const StageAddOns& add_ons) {
  // Each stage's output shape from a dry forward of two zero examples in eval mode (so
  // that no batch-norm statistic moves).
  std::vector<int64_t> shape{2};
  shape.insert(shape.end(), data_.spec.input_shape.begin(), data_.spec.input_shape.end());
  at::Tensor x = at::zeros(shape, at::TensorOptions().dtype(data_.spec.integer_input ? at::kLong : dtype_));
  for (const auto& stage : stages_) {
    if (stage->is_last()) {
      std::vector<int64_t> logits = data_.spec.target_shape;  // a prediction per target
      logits.push_back(data_.spec.classes);
      add_ons.prepare(*stage, logits, data_.spec);
      continue;
    }
    stage->set_training(false);
    x = stage->evaluate(x.to(stage->device())).activation();
    add_ons.prepare(*stage, x.sizes().slice(1).vec(), data_.spec);
  }
}

std::vector<int> Runner::settled_time_balance(std::vector<int> measured) const {
  // Timings differ from one measurement to the next, but a run must be cut the same way
  // everywhere: a resumed run keeps the split it started with (its config.yaml), and in a
  // multi-process run every process takes process 0's split.
  if (options_.resume) {
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

at::Tensor Runner::sample_inputs(int64_t n) const {
  std::vector<int64_t> index(static_cast<size_t>(std::min<int64_t>(n, data_.train->size())));
  std::iota(index.begin(), index.end(), 0);
  const at::Tensor x = data_.train->get(index, 0).x;
  return data_.spec.integer_input ? x : x.to(dtype_);
}

void Runner::check_model_takes_data() {
  // Two real examples through every stage (evaluation mode: no statistic moves, no
  // gradient), so that a model that cannot take the dataset's examples fails here, with
  // the files named, and not in the first training step after the run folder exists.
  const int64_t n = std::min<int64_t>(2, data_.train->size());
  std::vector<int64_t> index(static_cast<size_t>(n));
  std::iota(index.begin(), index.end(), 0);
  const Batch batch = data_.train->get(index, 0);
  Tensors x{data_.spec.integer_input ? batch.x : batch.x.to(dtype_)};
  try {
    for (const auto& stage : stages_) {
      stage->set_training(false);
      const at::Tensor target = stage->is_last() ? batch.y.to(stage->device()) : at::Tensor();
      for (at::Tensor& t : x) t = t.to(stage->device());
      ForwardResult r = stage->evaluate(x, target);
      if (!stage->is_last()) x = std::move(r.activations);
      if (stage->is_last()) break;  // replica 0 is enough
    }
  } catch (const c10::Error& err) {
    model_data_mismatch(err);
  }
}

void Runner::model_data_mismatch(const c10::Error& err) const {
  std::string why = err.what_without_backtrace();
  why = why.substr(0, why.find('\n'));
  throw ConfigError(fmt::format("{}: model {} cannot take the examples of dataset {} (shape {}, {}): {}. Fix: check "
                                "the model's options against the dataset (`pipelab describe {}` shows the shapes).",
                                e_.source->file(), e_.model->type(), e_.dataset->type(),
                                shape_text(data_.spec.input_shape), data_.spec.integer_input ? "token ids" : "features",
                                why, e_.source->file()));
}

void Runner::check_schedule(const Schedule& s, const ValidateOptions& rules) const {
  validate_schedule(s, rules);
  std::vector<int> placed = s.placement();
  for (size_t r = 0; r < placed.size() && r < plan_.placement().size(); ++r) {
    if (placed[r] >= 0 && placed[r] != plan_.placement()[r]) {
      throw UserError(fmt::format("scheme {} places stage {} on device {}, but its schedule runs it on device d{}. Fix: "
                                  "make the scheme's placement and its schedule agree",
                                  e_.scheme->type(), r, plan_.placement()[r], placed[r]));
    }
  }
}

void Runner::check_schedules() const {
  const int stages = plan_.stages();
  plan_.check_batch_size(e_.run.batch_size);
  // The first schedule run's (a mini-batch's, an epoch's or the run's first epoch's), with
  // its messages: what the executors run.
  check_schedule(plan_.training(plan_.run_units(e_.run.batch_size, train_->batches())), plan_.rules());
  validate_schedule(schedules::forward_only(stages, static_cast<int>(std::max<int64_t>(test_->batches(), 1)),
                                            {plan_.placement().begin(), plan_.placement().begin() + stages}));
}

double Runner::lr_at(int64_t step) const {
  return e_.optimizer->base_lr() * e_.lr_schedule->factor_at_step(step, train_->batches(), e_.run.epochs);
}

std::vector<Stage*> Runner::stages() const {
  std::vector<Stage*> out;
  for (const auto& s : stages_) out.push_back(s.get());
  return out;
}

}  // namespace pipelab
