#include "core/processes/device_channel.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <vector>

#include "core/util/error.h"

// NCCL's c10d backend exists where LibTorch was built with it (USE_C10D_NCCL, defined by
// LibTorch's CMake targets) and pipelab with CUDA; its headers need nccl.h, which the
// wheel's nvidia-nccl package provides (core/CMakeLists.txt adds it).
#if defined(PIPELAB_WITH_CUDA) && defined(USE_C10D_NCCL) && defined(PIPELAB_HAVE_NCCL_HEADERS)
#define PIPELAB_NCCL 1
#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace pipelab::dist {

std::string device_identity(const c10::Device& device) {
  if (!device.is_cuda()) return "cpu";
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
#ifdef PIPELAB_NCCL
  // NCCL refuses a communicator in which two ranks share a GPU, which it recognises by the
  // PCI bus id (CUDA_VISIBLE_DEVICES renumbers devices; the bus id stays).
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(device.index());
  return fmt::format("{}/{:04x}:{:02x}:{:02x}", host, p->pciDomainID, p->pciBusID, p->pciDeviceID);
#else
  return fmt::format("{}/{}", host, device.str());
#endif
}

#ifdef PIPELAB_NCCL

bool nccl_available() { return true; }

namespace {

class NcclChannel : public DeviceChannel {
 public:
  NcclChannel(const c10::intrusive_ptr<c10d::Store>& store, int rank, double timeout_seconds)
      : rank_(rank), timeout_(static_cast<int64_t>(timeout_seconds * 1000)) {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout_;
    group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, 2, options);
  }
  ~NcclChannel() override {
    try {
      complete_sends();
    } catch (...) {  // a peer that already left; nothing to report from a destructor
    }
  }

  void send(const at::Tensor& t) override {
    std::vector<at::Tensor> ts{t.contiguous()};
    auto work = group_->send(ts, 1 - rank_, 0);
    std::lock_guard<std::mutex> lock(mutex_);
    sends_.push_back(std::move(work));
    while (!sends_.empty() && sends_.front()->isCompleted()) sends_.pop_front();
  }

  void recv(at::Tensor& t) override {
    std::vector<at::Tensor> ts{t};
    try {
      // Without blocking wait, wait() makes the current stream wait for NCCL's.
      group_->recv(ts, 1 - rank_, 0)->wait(timeout_);
    } catch (const std::exception& e) {
      throw PeerError(fmt::format("an NCCL receive failed (a peer left?): {}", e.what()));
    }
  }

  void complete_sends() override {
    std::deque<c10::intrusive_ptr<c10d::Work>> sends;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      sends.swap(sends_);
    }
    for (auto& w : sends) w->wait(timeout_);
  }

 private:
  int rank_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group_;
  std::mutex mutex_;
  std::deque<c10::intrusive_ptr<c10d::Work>> sends_;
};

}  // namespace

std::unique_ptr<DeviceChannel> nccl_channel(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                            double timeout_seconds) {
  return std::make_unique<NcclChannel>(store, rank, timeout_seconds);
}

#else

bool nccl_available() { return false; }

std::unique_ptr<DeviceChannel> nccl_channel(const c10::intrusive_ptr<c10d::Store>&, int, double) {
  throw UserError("this pipelab was built without NCCL (it needs a CUDA build of LibTorch with c10d's NCCL "
                  "backend). Fix: run.executor.backend: gloo.");
}

#endif

}  // namespace pipelab::dist
