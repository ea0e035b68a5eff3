#pragma once
/// The scheme configurations that executor-equivalence tests run: every registered scheme
/// with its defaults, plus the variants whose routes or weight policies differ. Read from
/// the registry, so a new scheme is covered the day it is registered.
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pipelab::testing {

struct SchemeCase {
  std::string scheme;  ///< the scheme section, e.g. "{type: gpipe, chunks: 4}"
  int stages;
  int devices;  ///< the devices (threads, processes) the scheme places the stages on
};

/// Every case at 2 and 4 stages (dp: 2 and 4 replicas); schemes with two stages per device
/// at 2 and 4 stages (1 and 2 devices); `custom` with the shipped example schedules. Not the
/// schemes whose units are sequence segments: they need a causal language model, not these
/// suites' MLP, and sequence_scheme_cases() gives them to the same checks.
std::vector<SchemeCase> scheme_cases();
/// The registered schemes that cut sequences into segments (Scheme::sequence_split), with
/// their defaults and variants, at 2 and 4 stages (tests/schemes/sequence_segments_test.cpp).
std::vector<SchemeCase> sequence_scheme_cases();
/// A test-name-safe label: "_type__gpipe__chunks__4__4stages".
std::string scheme_case_name(const ::testing::TestParamInfo<SchemeCase>& info);

}  // namespace pipelab::testing
