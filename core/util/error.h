#pragma once
/// Two error tiers (docs/contributing.md, habit 6): a user's mistake throws UserError with a message
/// that says what was wrong and how to fix it; a broken internal invariant is an assertion
/// (InternalError). Only main() in tools/ turns exceptions into exit codes.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace pipelab {

/// A mistake in the user's input (config, file, dataset, command line). Exit code 2.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A result could not be written (a full disk, a removed folder): the run stops rather
/// than lose results silently. Exit code 1; `pipelab run --resume` continues it.
class WriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Another process of a multi-process run stopped or cannot be reached (it was killed, it
/// failed, the network broke): not a mistake in the input. Exit code 1.
class PeerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A bug in pipelab: an invariant that should always hold did not.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace pipelab

/// Checks an internal invariant; throws InternalError naming the source location.
#define PIPELAB_ASSERT(cond, ...)                                                          \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      throw ::pipelab::InternalError(fmt::format("{}:{}: internal error: {} ({})",        \
                                                 __FILE__, __LINE__, #cond,               \
                                                 fmt::format(__VA_ARGS__)));              \
    }                                                                                      \
  } while (false)
