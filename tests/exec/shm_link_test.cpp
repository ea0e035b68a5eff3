// The shared-memory link between two ranks of one host (core/processes/shm_link.h): messages
// arrive whole and in any order the receiver asks for, the ring wraps and never blocks the
// sender, what does not fit is reported as sent elsewhere, and a peer that stops or dies
// ends a wait with an error naming it.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <algorithm>
#include <random>
#include <thread>

#include "core/processes/process_group.h"
#include "core/processes/shm_link.h"
#include "core/util/error.h"

namespace pipelab::shm_link_test {
namespace {

using dist::ShmLink;
using dist::ShmOptions;

std::string unique_name(const char* what) {
  static int count = 0;
  return fmt::format("/pipelab-test-{}-{}-{}", ::getpid(), what, count++);
}

struct Pair {
  std::unique_ptr<ShmLink> receiver, sender;
  Pair(const ShmOptions& options, const char* what) {
    const std::string name = unique_name(what);
    std::string why;
    receiver = ShmLink::create(name, options, why);
    EXPECT_TRUE(receiver) << why;
    sender = ShmLink::open(name, options, receiver->nonce(), why);
    EXPECT_TRUE(sender) << why;
    receiver->unlink();
  }
};

/// Message `tag`'s bytes: a pattern only it has.
std::vector<uint8_t> pattern(int64_t tag, int64_t size) {
  std::vector<uint8_t> out(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>((tag * 131 + i * 7) & 0xff);
  return out;
}

bool send(ShmLink& link, int64_t tag, int64_t size) {
  const std::vector<uint8_t> bytes = pattern(tag, size);
  return link.send(tag, size, [&](uint8_t* at) { std::memcpy(at, bytes.data(), bytes.size()); });
}

void expect_message(ShmLink::Taken t, int64_t tag, int64_t size) {
  ASSERT_TRUE(t.bytes.defined()) << "tag " << tag;
  ASSERT_EQ(t.bytes.numel(), size);
  const std::vector<uint8_t> want = pattern(tag, size);
  EXPECT_EQ(std::memcmp(t.bytes.data_ptr(), want.data(), want.size()), 0) << "tag " << tag;
}

TEST(ShmLink, MessagesArriveWholeInTheOrderTheReceiverAsks) {
  ShmOptions o;
  o.ring_bytes = 1 << 16;
  Pair p(o, "order");
  for (int t = 0; t < 5; ++t) ASSERT_TRUE(send(*p.sender, t, 100 + t));
  for (int t : {3, 0, 4, 1, 2}) expect_message(p.receiver->take(t), t, 100 + t);
}

TEST(ShmLink, AFullRingSendsElsewhereAtOnceAndTheReceiverIsTold) {
  ShmOptions o;
  o.ring_bytes = 4096;
  Pair p(o, "full");
  ASSERT_TRUE(send(*p.sender, 1, 3000));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(send(*p.sender, 2, 3000));  // no room while 1 is unread: no wait either
  EXPECT_FALSE(send(*p.sender, 3, 5000));  // never fits
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
  p.sender->sent_elsewhere(2, 3000);
  p.sender->sent_elsewhere(3, 5000);
  const ShmLink::Taken two = p.receiver->take(2);
  EXPECT_FALSE(two.bytes.defined());
  EXPECT_EQ(two.size, 3000);
  expect_message(p.receiver->take(1), 1, 3000);
  EXPECT_EQ(p.receiver->take(3).size, 5000);
  // Room again once 1 was read, at the ring's start.
  ASSERT_TRUE(send(*p.sender, 4, 3000));
  expect_message(p.receiver->take(4), 4, 3000);
}

TEST(ShmLink, TwoThreadsWrapTheRingManyTimesAndEveryByteArrives) {
  // A fuzz of sizes and of the receiver's order: tags come in windows of 8, taken shuffled.
  ShmOptions o;
  o.ring_bytes = 1 << 14;
  o.markers = 16;
  o.timeout_seconds = 30;
  Pair p(o, "fuzz");
  constexpr int kMessages = 4000;
  std::vector<int64_t> size(kMessages);
  std::mt19937 rng(7);
  for (int64_t& s : size) s = std::uniform_int_distribution<int64_t>(1, 6000)(rng);
  std::thread sender([&] {
    for (int t = 0; t < kMessages; ++t) {
      if (!send(*p.sender, t, size[static_cast<size_t>(t)])) p.sender->sent_elsewhere(t, size[static_cast<size_t>(t)]);
    }
  });
  int64_t ring = 0;  // bytes that came through the ring
  for (int base = 0; base < kMessages; base += 8) {
    std::vector<int> window;
    for (int t = base; t < std::min(base + 8, kMessages); ++t) window.push_back(t);
    std::shuffle(window.begin(), window.end(), rng);
    for (int t : window) {
      ShmLink::Taken got = p.receiver->take(t);
      if (got.bytes.defined()) {
        ring += size[static_cast<size_t>(t)];
        expect_message(std::move(got), t, size[static_cast<size_t>(t)]);
      } else {
        EXPECT_EQ(got.size, size[static_cast<size_t>(t)]);
      }
    }
  }
  sender.join();
  // How many go elsewhere depends on how far the receiver lags (a loaded machine: more), but
  // the ring wrapped many times over either way.
  EXPECT_GT(ring, 8 * o.ring_bytes);
}

TEST(ShmLink, AbortStopsAWaitingReceiver) {
  ShmOptions o;
  o.ring_bytes = 4096;
  Pair p(o, "abort");
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    p.receiver->abort();
  });
  EXPECT_THROW(p.receiver->take(1), dist::ReceiveAborted);
  stopper.join();
  p.receiver->reset();
  ASSERT_TRUE(send(*p.sender, 1, 10));
  expect_message(p.receiver->take(1), 1, 10);
}

TEST(ShmLink, APeerThatClosesOrGoesSilentIsNamed) {
  ShmOptions o;
  o.ring_bytes = 4096;
  o.self_rank = 1;
  o.peer_rank = 0;
  {
    Pair p(o, "closed");
    p.sender.reset();
    try {
      p.receiver->take(1);
      ADD_FAILURE() << "no error";
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1 lost rank 0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("closed its end"), std::string::npos) << e.what();
    }
  }
  o.timeout_seconds = 0.2;
  Pair p(o, "silent");
  try {
    p.receiver->take(1);
    ADD_FAILURE() << "no error";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing came for 0.2 s"), std::string::npos) << e.what();
  }
}

TEST(ShmLink, AKilledSenderProcessIsNamed) {
  ShmOptions o;
  o.ring_bytes = 4096;
  o.self_rank = 1;
  o.peer_rank = 0;
  const std::string name = unique_name("killed");
  std::string why;
  auto receiver = ShmLink::create(name, o, why);
  ASSERT_TRUE(receiver) << why;
  const uint64_t nonce = receiver->nonce();
  const pid_t child = ::fork();
  if (child == 0) {
    // The sender's process: one message, then gone without closing its end (as under SIGKILL).
    std::string w;
    auto sender = ShmLink::open(name, o, nonce, w);
    if (sender) send(*sender, 1, 64);
    ::_exit(sender ? 0 : 3);
  }
  expect_message(receiver->take(1), 1, 64);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  try {
    receiver->take(2);
    ADD_FAILURE() << "no error";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("is gone"), std::string::npos) << e.what();
  }
}

TEST(ShmLink, SegmentsThatCannotBeHadSayWhy) {
  ShmOptions o;
  o.ring_bytes = int64_t{1} << 50;  // a petabyte: more than any /dev/shm
  std::string why;
  EXPECT_FALSE(ShmLink::create(unique_name("huge"), o, why));
  EXPECT_NE(why.find("cannot commit"), std::string::npos) << why;
  o.ring_bytes = 4096;
  const std::string name = unique_name("nonce");
  auto receiver = ShmLink::create(name, o, why);
  ASSERT_TRUE(receiver) << why;
  EXPECT_FALSE(ShmLink::open(name, o, receiver->nonce() + 1, why));
  EXPECT_NE(why.find("not the one its receiver made"), std::string::npos) << why;
  EXPECT_FALSE(ShmLink::open(unique_name("missing"), o, 0, why));
  EXPECT_NE(why.find("cannot open"), std::string::npos) << why;
}

}  // namespace
}  // namespace pipelab::shm_link_test
