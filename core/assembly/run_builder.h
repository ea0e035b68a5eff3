#pragma once
/// Builds a run's parts (core/assembly/run_parts.h) from an experiment: the data and its limits,
/// the run plan, the balance, every replica's stages with their weights (init.from, tied
/// parameters), policies, routes and add-ons, the gradient sync, the codecs and the shadow;
/// then checks them (core/assembly/run_checks.h). Nothing is written, so a bad configuration
/// leaves no partial output.
#include <memory>
#include <optional>
#include <vector>

#include "core/assembly/run_parts.h"
#include "core/experiment/experiment.h"
#include "core/model/tensor_names.h"

namespace pipelab {

/// The intra-op threads of a run that leaves run.threads at 0: OMP_NUM_THREADS if set, else
/// half the cores, at least 1.
int default_threads();

class RunBuilder {
 public:
  /// `resume`: the run continues an earlier session (a measured balance keeps its split).
  RunBuilder(Experiment& experiment, bool resume);
  /// Builds and checks everything; a ConfigError or UserError names what is wrong.
  std::unique_ptr<RunParts> build();

 private:
  /// The dataset, cut to dataset.limit and dataset.test_limit (reported in limits_report).
  void load_data();
  void build_stages();
  /// What the run plan is compiled from; `ties_cross_stages` once the balance places the ties.
  PlanRequest plan_request(std::optional<bool> ties_cross_stages) const;
  /// partition.balance resolved for these blocks (measured ones on `device`).
  std::vector<int> settle_balance(std::vector<Block>& blocks, c10::Device device) const;
  /// A `balance: time` split that is the same on every process and across --resume.
  std::vector<int> settled_time_balance(std::vector<int> measured) const;
  /// partition.offload.blocks names blocks of the model (a ConfigError at the entry).
  void check_offload_blocks(const std::vector<Block>& blocks) const;
  /// A model whose weights, gradients and optimizer state exceed this machine's memory (on
  /// GPUs: whose weights, built here before they move) is refused (a ConfigError at `model`)
  /// before any block is built: LibTorch's allocator or the kernel's out-of-memory killer
  /// would end the run without a word. Parameters are counted on the meta device.
  void check_model_fits() const;
  /// The listed blocks lie on offloading stages, and each listed stage holds one of them (a
  /// ConfigError at the entry).
  void check_offload_block_stages() const;
  /// Replica r's stages from the model's blocks (split by the balance), appended.
  void build_replica(int r, std::vector<Block> blocks, const std::vector<c10::Device>& devices);
  /// Lets the scheme's add-ons add to each stage (e.g. auxiliary heads), given its output shape.
  void prepare_stages(const StageAddOns& add_ons);
  /// init.from: every replica's stages from a state_dict file (the report for the log).
  void load_initial_weights();
  /// The model's ties in init.from's entries: one copy given fills the other (Hugging Face
  /// writes no lm_head.weight for a tied model); two that differ are an untied model's
  /// checkpoint (a ConfigError at init.from).
  void tie_file_entries(TensorDict& state, const std::string& path) const;
  /// init.names' rules: the user's, or the model's published names of its preset.
  std::vector<NameRule> name_rules() const;
  /// Resolves the model's tied parameters (ModelDef::ties) into ties and starts every second
  /// copy equal to its first.
  void tie_parameters();
  /// Gives every stage its optimizer, learning-rate schedule, weight policy and gradient
  /// route, and the executors their slots.
  void wire_stages(const StageAddOns& add_ons);
  /// Compiles the plan's sync (replicas, clip, ties) and gives every stage the collective
  /// its ALLREDUCE joins (StageSlot::all_reduce; core/assembly/run_builder_gradients.cpp).
  void connect_gradients();
  /// Gives every slot the boundaries' codecs when the experiment compresses.
  void connect_codecs();
  /// run.shadow: sync — a replica of the model observing every stage (core/feed/shadow_sync.h).
  void start_shadow();
  /// The training and test loaders, and the learning rate by step that reads them.
  void make_loaders();

  Experiment& e_;
  bool resume_;
  std::unique_ptr<RunParts> p_;
};

}  // namespace pipelab
