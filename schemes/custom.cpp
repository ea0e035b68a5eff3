/// `custom`: a schedule read from a file (docs/schedules.md has the grammar), trained with
/// synchronous weights (schemes/shared/sync_pipeline.h): a new schedule needs no C++.
///
///   scheme: {type: custom, file: experiments/schedules/1f1b_d2_m4.sched}
///
/// The file is the text form (`d0: 0F0 0F1 ...`, what `pipelab schedule` prints) or, for a
/// name ending in .csv, torch.distributed.pipelining's CSV (a row per device, an action per
/// cell). Its micro-batches are the mini-batch's chunks; its stages are partition.stages and
/// its devices the stage threads or processes. A file without SEND/RECV actions gets them
/// from lower(); one with them is taken as written.
#include <filesystem>
#include <mutex>

#include "core/io/input_file.h"
#include "core/schedule/lower.h"
#include "core/schedule/validate.h"
#include "schemes/shared/sync_pipeline.h"

namespace pipelab {
namespace {

struct CustomOptions {
  std::string file;
  int virtual_stages = 0;
  template <class V>
  void fields(V& v) {
    v("file", file, "the schedule file: text (`d0: 0F0 0F1 ...`) or torch-pipelining CSV (*.csv)");
    v("virtual_stages", virtual_stages,
      "stages per device the file must have (0: whatever it has); a check, the file decides the placement",
      non_negative);
  }
};

class Custom : public Configured<Scheme, CustomOptions> {
 public:
  using Configured::Configured;
  int micro_batches() const override { return loaded().micro_batches(); }
  int stages(int requested) const override {
    const int in_file = loaded().stages();
    if (requested != 0 && requested != in_file) {
      fail("file", fmt::format("the schedule in {} has {} stages, but partition.stages is {}", options_.file, in_file,
                               requested),
           fmt::format("set partition.stages: {} or write a schedule for {} stages", in_file, requested));
    }
    return in_file;
  }
  std::vector<int> placement(int) const override { return loaded().placement(); }
  Schedule schedule(int stages, int units) const override {
    const Schedule& s = loaded();
    if (stages != s.stages() || units != s.micro_batches()) {
      fail("file",
           fmt::format("the schedule in {} is for {} stages and {} micro-batches; this run needs {} and {}",
                       options_.file, s.stages(), s.micro_batches(), stages, units),
           "make run.batch_size at least the file's micro-batch count, and partition.stages its stage count");
    }
    return s;
  }

  ValidateOptions schedule_rules(int stages) const override {
    ValidateOptions o = Scheme::schedule_rules(stages);
    o.one_update = true;  // synchronous weights: one step per mini-batch
    return o;
  }

 private:
  const Schedule& loaded() const {
    std::call_once(once_, [&] {
      if (options_.file.empty()) fail("file", "no schedule file given", "set scheme.file: path/to/my.sched");
      std::string text;
      try {
        text = read_file(options_.file, 64u << 20);  // names the file and the fix
      } catch (const UserError& e) {
        throw UserError(fmt::format("scheme.file: cannot read the schedule: {}", e.what()));
      }
      const bool csv = std::filesystem::path(options_.file).extension() == ".csv";
      Schedule s = csv ? Schedule::parse_csv(text, options_.file) : Schedule::parse(text, options_.file);
      if (s.stages() == 0) fail("file", fmt::format("{} holds no actions", options_.file), "write one line per device");
      // Every error names the file, line and column of the action (Schedule::source).
      validate_schedule(s, schedule_rules(s.stages()));
      if (options_.virtual_stages > 0 && s.stages() != s.devices() * options_.virtual_stages) {
        fail("virtual_stages",
             fmt::format("{} has {} stages on {} devices, not {} per device", options_.file, s.stages(), s.devices(),
                         options_.virtual_stages),
             "fix the file or the option (0 accepts any placement)");
      }
      schedule_ = with_communication(s);
    });
    return schedule_;
  }

  mutable std::once_flag once_;
  mutable Schedule schedule_;
};

}  // namespace

PIPELAB_REGISTER(Scheme, Custom, "custom", "a schedule from a file (text or torch-pipelining CSV), synchronous weights");

}  // namespace pipelab
