#pragma once
/// Asynchronous decoupled greedy learning with replay buffers (Belilovsky, Eickenberg,
/// Oyallon, ICML 2020, "Asynchronous DGL with Replay"; docs/schemes.md, "dgl"), as the
/// authors' code drives it (eugenium/DGL, buffer_experiments/cifar_buffer.py): a driver picks
/// one module at a time; module 0 trains on the next mini-batch, module k > 0 on an entry of
/// a ring buffer of module k-1's outputs, and each module pushes its (detached) output into
/// the next buffer. pipelab makes the driver's sequence of picks explicit and seeded, so the
/// whole run is one static schedule with replayed inputs (Schedule::reads).
#include <cstdint>
#include <string>
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab::dgl {

/// How the driver picks the next module.
enum class Order {
  Uniform,     ///< the reference's default: uniform over modules, one optionally slowed
  RoundRobin,  ///< the reference's `--layer-sequence sequential`
  List,        ///< an explicit list of modules, used cyclically
};

/// Which entry among the least-used ones a module takes.
enum class Ranking {
  Lifo,       ///< the most recently written (the paper's "priority LIFO"; default)
  Reference,  ///< the reference code's ranking: a full ring's oldest slot is the freshest (docs/schemes.md, "Quirks")
};

struct ReplayRule {
  int buffer = 0;  ///< entries per boundary (the reference's `--buffer`; 0: synchronous DGL, no replay)
  Order order = Order::Uniform;
  std::vector<int> picks;  ///< Order::List
  int slow_stage = -1;     ///< the reference's `--layer_noise` (-1: none)
  double slowdown = 0;     ///< its `--noise`: the slowed module's pick weight is 1 - slowdown
  int max_reuse = 0;       ///< its `--max-buffer-reuse` (0: unbounded)
  int64_t seed = 0;        ///< the seed of Order::Uniform's draws
  Ranking ranking = Ranking::Lifo;
};

/// The driver's picks for one epoch of `units` mini-batches over `stages` modules: the
/// reference's fill 0, 0, 1, 1, ..., K-1, K-1 (Uniform and RoundRobin), then the order's
/// picks, until module 0 has taken every mini-batch once (the next pick of module 0 ends it).
/// A UserError for a list that names no module 0 or a module out of range.
std::vector<int> pick_sequence(const ReplayRule& rule, int stages, int units);

/// One boundary's ring of `size` entries, each an output (its micro-batch on the writing
/// stage) and how often it was read.
class RingBuffer {
 public:
  RingBuffer(int size, Ranking ranking, int max_reuse)
      : slots_(static_cast<size_t>(size)), ranking_(ranking), max_reuse_(max_reuse) {}
  /// Writes `mb` at the write pointer (over the oldest entry once the ring is full).
  void push(int mb);
  /// The entry a module reads next (least used first, then the freshest by the ranking),
  /// counted as read; -1 when there is none (empty, or every entry read max_reuse times).
  int take();

 private:
  struct Slot {
    int mb = -1;
    int uses = 0;
  };
  std::vector<Slot> slots_;
  size_t next_ = 0;  ///< the write pointer
  Ranking ranking_;
  int max_reuse_;
};

/// The schedule of `picks` over `stages` modules: each pick of a module that has an input
/// runs F, B and U on it (stage 0 on the next mini-batch, stage k on the entry its buffer
/// gives), sends its output to the next stage, which receives every output as it is made and
/// keeps those some forward reads (Schedule::set_replay).
Schedule replay_schedule(const ReplayRule& rule, int stages, const std::vector<int>& picks);

}  // namespace pipelab::dgl
