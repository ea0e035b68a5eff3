// What a run records of each component (config.yaml: `{type, ...resolved options}`) reads back
// as the same component: for every registered scheme, optimizer, model, dataset, executor,
// LR schedule and codec that its defaults make, the resolved options written out, read again
// and written once more are the same text. An option left unset is written as null, which must
// read back as unset (a range check on it once refused a nesterov_async run's own config.yaml).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <exception>
#include <memory>
#include <string>

#include "core/compress/codec.h"
#include "core/config/config_node.h"
#include "core/config/registry.h"
#include "core/data/dataset.h"
#include "core/exec/executor.h"
#include "core/model/model.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/scheme/scheme.h"

namespace pipelab::resolved_options_test {
namespace {

/// The components of kind `Base` that their defaults (and the keys `given`) make, each checked;
/// returns how many.
template <class Base>
int check_kind(const char* given = "{}") {
  int checked = 0;
  const auto source = std::make_shared<ConfigSource>("config.yaml");
  for (const std::string& name : Registry<Base>::get().names()) {
    std::unique_ptr<Base> made;
    try {
      YAML::Node section = YAML::Load(given);
      section["type"] = name;
      made = Registry<Base>::get().create(ConfigNode(section, source, Base::kKind));
    } catch (const std::exception&) {
      continue;  // its section needs keys of its own (a required option)
    }
    const std::string written = YAML::Dump(made->resolved());
    std::string again;
    try {
      again = YAML::Dump(Registry<Base>::get().create(ConfigNode(YAML::Load(written), source, Base::kKind))->resolved());
    } catch (const std::exception& e) {
      ADD_FAILURE() << Base::kKind << " " << name << ": its resolved options do not read back:\n" << written << "\n"
                    << e.what();
      continue;
    }
    EXPECT_EQ(again, written) << Base::kKind << " " << name;
    ++checked;
  }
  return checked;
}

TEST(ResolvedOptions, EveryComponentsRecordedOptionsReadBackAsTheSame) {
  EXPECT_GE(check_kind<Scheme>(), 25);
  EXPECT_GE(check_kind<OptimizerFactory>("{lr: 0.01}"), 5);
  EXPECT_GE(check_kind<ModelFactory>(), 5);
  EXPECT_GE(check_kind<DatasetFactory>(), 3);
  EXPECT_GE(check_kind<Executor>(), 2);
  EXPECT_GE(check_kind<LrSchedule>(), 2);
  EXPECT_GE(check_kind<Codec>(), 3);
}

}  // namespace
}  // namespace pipelab::resolved_options_test
