#pragma once
/// An experiment file, read in one place into typed options and registered components.
/// Top-level sections: model, dataset, partition, scheme, optimizer, lr_schedule, run,
/// init (and `pipelab`, the provenance a run writes into its resolved config).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/compress/compression.h"
#include "core/data/dataset.h"
#include "core/data/loader.h"
#include "core/exec/executor.h"
#include "core/experiment/targets.h"
#include "core/model/model.h"
#include "core/model/partition.h"
#include "core/model/tensor_names.h"
#include "core/optim/gradient_options.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/plan/run_plan.h"
#include "core/scheme/scheme.h"
#include "core/stage/precision.h"

namespace pipelab {

/// The `run:` section.
struct RunOptions {
  enum class Dtype { Float32, Float64 };
  enum class Shadow { Off, Sync };
  enum class CheckpointFormat { Pt, Safetensors };
  int epochs = 0;
  int64_t max_steps = 0;
  int64_t batch_size = 0;
  std::optional<int64_t> eval_batch_size;
  int64_t seed = 0;
  std::vector<std::string> devices{"cpu"};
  std::string output;
  std::optional<std::string> data_dir;
  int threads = 0;
  Dtype dtype = Dtype::Float32;
  Amp amp = Amp::None;
  LossScaleOptions loss_scale;
  bool channels_last = false;
  bool cuda_graphs = false;
  int checkpoint_every = 0;
  CheckpointFormat checkpoint_format = CheckpointFormat::Pt;
  bool progress = true;
  Shadow shadow = Shadow::Off;
  bool trace = true;
  PrefetchOptions loader;
  TargetOptions targets;
  template <class V>
  void fields(V& v) {
    v.required("epochs", epochs, "training epochs", in_range(1, 1e6));
    v.required("batch_size", batch_size, "mini-batch size", in_range(1, 1e9));
    v("max_steps", max_steps,
      "stop after this many training steps in all, evaluating and saving as after a last epoch (0: every epoch's)",
      non_negative);
    v("eval_batch_size", eval_batch_size, "evaluation batch size (default: batch_size)");
    v("seed", seed, "seed of weights, data order, dropout", non_negative);
    v("devices", devices, "one device for all stages, or one per stage: cpu, cuda:N", non_empty);
    v("output", output, "result folder (default: runs/<file name>)");
    v("data_dir", data_dir, "dataset folder (default: $PIPELAB_DATA_DIR, else ./data)");
    v("threads", threads,
      "intra-op threads (0: OMP_NUM_THREADS if set, else half the cores, at least 1; docs/executors.md, Threads)",
      in_range(0, 1024));
    v.choice("dtype", dtype, Choices<Dtype>{{"float32", Dtype::Float32}, {"float64", Dtype::Float64}},
             "parameter and activation precision");
    v.choice("amp", amp, Choices<Amp>{{"none", Amp::None}, {"bf16", Amp::Bf16}, {"fp16", Amp::Fp16}},
             "mixed precision: forwards under autocast in this dtype, master weights stay float32 "
             "(fp16 adds a dynamic loss scaler per stage)");
    v("channels_last", channels_last,
      "keep 4-D weights and image batches in channels-last (NHWC) layout, as "
      "torch.channels_last: faster convolutions on GPU tensor cores");
    v("cuda_graphs", cuda_graphs,
      "capture each stage's training forward and backward as CUDA graphs and replay them (CUDA devices only; "
      "the first step runs eagerly, checkpointed forwards always do; docs/gpu.md, CUDA graphs)");
    v.section("loss_scale", loss_scale, "fp16's per-stage dynamic loss scaler (torch.amp.GradScaler's defaults)");
    v("checkpoint_every", checkpoint_every, "save weights every N epochs (0: only at the end)", non_negative);
    v.choice("checkpoint_format", checkpoint_format,
             Choices<CheckpointFormat>{{"pt", CheckpointFormat::Pt}, {"safetensors", CheckpointFormat::Safetensors}},
             "the weight files' format: pt (torch.save's) or safetensors (Hugging Face's); the resume state "
             "(checkpoints/state.pt) is always .pt, since it nests more than tensors");
    v("progress", progress, "show a progress bar (plain lines when not a terminal)");
    v.choice("shadow", shadow, Choices<Shadow>{{"off", Shadow::Off}, {"sync", Shadow::Sync}},
             "sync: also compute, at every update, the gradient synchronous training would apply there, and "
             "record how far the scheme's is from it in metrics/stages.csv (never changes the run)");
    v("trace", trace,
      "record every action of the last training epoch (of the whole run under flush: never) and write "
      "trace.json (Perfetto, chrome://tracing), metrics/actions.csv and metrics/costs.json (measured per-stage "
      "costs: times, message sizes, host memory)");
    v.section("loader", loader, "batches built ahead by worker threads: `loader: {workers: N, prefetch: K}`");
    v.section("targets", targets,
              "values to reach, as epochs.csv writes them (`targets: {test_acc: 90, test_loss: 0.3}`): summary.json's "
              "time_to_target gives the training time to each, measured and, with `run --cluster`, simulated");
  }
  bool any_cuda_device() const {
    for (const std::string& d : devices) {
      if (d.rfind("cuda", 0) == 0) return true;
    }
    return false;
  }
  void check(const ConfigNode& node) const {
    if (targets.any()) targets.check(node.child("targets"));
    if (amp != Amp::None && dtype == Dtype::Float64) {
      node.child("amp").fail("mixed precision needs float32 master weights, but run.dtype is float64",
                             "set run.dtype: float32 or run.amp: none");
    }
    if (cuda_graphs) {
      for (const std::string& d : devices) {
        if (d.rfind("cuda", 0) != 0) {
          node.child("cuda_graphs").fail(fmt::format("CUDA graphs need CUDA devices, and run.devices names {}", d),
                                         "set run.cuda_graphs: false, or run.devices to cuda devices");
        }
      }
    }
    if (loader.pin_memory == PrefetchOptions::Pin::On && !any_cuda_device()) {
      node.child("loader").child("pin_memory").fail("pinned host memory speeds copies to a CUDA device, and "
                                                    "run.devices names none",
                                                    "remove run.loader.pin_memory, or set it to auto or false");
    }
    if (eval_batch_size && (*eval_batch_size <= 0 || *eval_batch_size > 1000000000)) {
      node.child("eval_batch_size").fail(fmt::format("must be a number in [1, 1000000000], got {}", *eval_batch_size),
                                         "set run.eval_batch_size to a positive integer (the test set's size at most "
                                         "is what it uses)");
    }
    {
      for (const char c : output) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          node.child("output").fail("the folder name holds a control character (a tab, a newline, ...)",
                                    "give a folder name of printable characters");
        }
      }
    }
  }
};

/// The `init:` section: start from weights written by torch.save(model.state_dict()).
struct InitOptions {
  std::optional<std::string> from;
  bool strict = true;
  bool skip_mismatched = false;
  TensorNames names;
  template <class V>
  void fields(V& v) {
    v("from", from, ".pt (torch.save) or .safetensors file with a state dict keyed by <block>.<param>");
    v("strict", strict, "every parameter and buffer of the model must be in the file");
    v("skip_mismatched", skip_mismatched,
      "a tensor whose shape differs from the model's keeps its initial value and is named in the log (fine-tuning "
      "onto another head) instead of being an error");
    v("names", names,
      "the file's names onto the model's: none, torchvision, huggingface (the model's published names), or "
      "{pattern: rewrite} rules in RE2 syntax, the first matching a whole name rewriting it (an empty rewrite "
      "drops the tensor); a list [rules, torchvision, rules] tries them in its order");
  }
};

/// Keys every dataset section takes besides its own (read by the experiment, not the
/// dataset): a short run on a real dataset trains or tests on a subset.
struct DataLimits {
  int64_t limit = 0, test_limit = 0;
  template <class V>
  void fields(V& v) {
    v("limit", limit, "train on this many training examples, a seeded subset in file order (0: all)", non_negative);
    v("test_limit", test_limit, "evaluate on this many test examples, chosen the same way (0: all)", non_negative);
  }
  bool any() const { return limit > 0 || test_limit > 0; }
};

/// A fully read experiment: components plus options, and where each came from.
struct Experiment {
  std::string name;
  std::shared_ptr<const ConfigSource> source;
  std::unique_ptr<ModelFactory> model;
  std::unique_ptr<DatasetFactory> dataset;
  std::unique_ptr<Scheme> scheme;
  std::unique_ptr<OptimizerFactory> optimizer;
  GradientOptions gradients;  ///< the optimizer section's clip and tied-weight keys
  std::unique_ptr<LrSchedule> lr_schedule;
  std::unique_ptr<Executor> executor;
  PartitionOptions partition;
  RunOptions run;
  DataLimits limits;  ///< dataset.limit, dataset.test_limit
  InitOptions init;
  CompressionSection compression;  ///< compresses nothing unless the file has the section
  /// What its run's plan is compiled from, read from the file once at load as `pipelab
  /// schedule` reads a file it does not build (core/experiment/plan_request.h); plan_request(e)
  /// copies it (the planner asks for it once per candidate).
  PlanRequest request;

  /// Reads an experiment file with `--set` overrides. Throws ConfigError.
  static Experiment load(const std::string& path, const std::vector<std::string>& overrides = {});
  /// Reads an experiment from YAML text (`name` stands in for the file in messages).
  static Experiment parse(const std::string& yaml, const std::string& name,
                          const std::vector<std::string>& overrides = {});
  /// Reads an already-loaded tree.
  static Experiment from_tree(YAML::Node root, std::shared_ptr<ConfigSource> source, const std::string& name);
  /// Where and how its dataset is read: run.data_dir, else $PIPELAB_DATA_DIR, else ./data,
  /// under run.seed (what `run` loads, and what the tools load for the data's shapes).
  DataContext data_context() const;
};

}  // namespace pipelab
