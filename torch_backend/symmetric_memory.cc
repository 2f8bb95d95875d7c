#include "torch_backend/symmetric_memory.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdlib>
#include <string>

#include "core/platform/platform.h"
#include "mori/device/barrier.h"
#include "torch_backend/signal_kernels.h"

namespace mori_torch {

WindowState::WindowState(mori_window_t *win, int device, std::vector<int> rank_to_global, int *rank_to_global_dev)
    : win_(win), device_(device), rank_to_global_(std::move(rank_to_global)), rank_to_global_dev_(rank_to_global_dev) {}

WindowState::~WindowState() {
  if (Finalized()) return;  // mori_finalize already released everything
  mori_window_destroy(win_);
  mori_platform_device_free(rank_to_global_dev_);
}

bool WindowState::StreamBarrier(int channel, void *stream) {
  if (memops_ < 0) {
    bool yes = false;
    memops_ = mori_platform_stream_memops_supported(device_, &yes) == 0 && yes;
  }
  mori_window_dev_t view = mori_window_device_view(win_);
  if (!memops_ || !view.sync_base || channel < 0 || channel >= MORI_SYNC_CHANNELS) return false;
  if (writes_[channel].empty() && view.lsa_size > 1) {
    // The device API's barrier area layout (mori/device/barrier.h): peer i
    // records my epochs at word channel * lsa_size + me of its area.
    for (int i = 0; i < view.lsa_size; i++) {
      if (i == view.lsa_rank) continue;
      writes_[channel].push_back(mori_sync_word(view, i, (uint64_t)channel * view.lsa_size + view.lsa_rank));
      waits_[channel].push_back(mori_sync_word(view, view.lsa_rank, (uint64_t)channel * view.lsa_size + i));
    }
  }
  uint64_t epoch = ++epochs_[channel];
  int rc = mori_platform_stream_signal_wait(stream, writes_[channel].data(), (int)writes_[channel].size(),
                                            waits_[channel].data(), (int)waits_[channel].size(), epoch);
  TORCH_CHECK(rc == 0, "MORI barrier: ", mori_last_error());
  return true;
}

void WindowState::Check(const char *where) {
  int rc = mori_window_check(win_);
  TORCH_CHECK(rc == 0, "MORI ", where, ": ", mori_last_error());
}

MoriSymmetricMemory::MoriSymmetricMemory(std::shared_ptr<WindowState> state, size_t offset)
    : state_(std::move(state)), offset_(offset), view_(mori_window_device_view(state_->win())) {}

std::vector<void *> MoriSymmetricMemory::get_buffer_ptrs() {
  void *const *p = mori_window_ptrs(state_->win());
  return std::vector<void *>(p, p + get_world_size());
}

std::vector<void *> MoriSymmetricMemory::get_signal_pad_ptrs() {
  void *const *p = mori_window_signal_pads(state_->win());
  if (!p) return std::vector<void *>(get_world_size(), nullptr);
  return std::vector<void *>(p, p + get_world_size());
}

void **MoriSymmetricMemory::get_buffer_ptrs_dev() { return const_cast<void **>(mori_window_ptrs_dev(state_->win())); }

void **MoriSymmetricMemory::get_signal_pad_ptrs_dev() {
  return const_cast<void **>(mori_window_signal_pads_dev(state_->win()));
}

size_t MoriSymmetricMemory::get_buffer_size() { return mori_window_size(state_->win()); }
int MoriSymmetricMemory::get_rank() { return view_.world_rank; }
int MoriSymmetricMemory::get_world_size() { return view_.world_size; }
c10::Device MoriSymmetricMemory::get_device() { return c10::Device(c10::DeviceType::CUDA, state_->device()); }
bool MoriSymmetricMemory::world_within_direct_access() { return view_.lsa_size == view_.world_size; }

namespace {
uint64_t TimeoutNs(size_t timeout_ms) { return (uint64_t)timeout_ms * 1000000ull; }

void CheckChannel(const MoriSymmetricMemory &, mori_window_dev_t view, int channel, int peer, const char *what) {
  TORCH_CHECK(view.signal_pads, "MORI ", what, ": this allocation has no signal pad (signal pad size was 0 at alloc)");
  size_t needed = ((size_t)channel + 1) * view.world_size * sizeof(uint32_t);
  TORCH_CHECK(channel >= 0 && needed <= view.signal_pad_size, "MORI ", what, ": channel ", channel, " needs ", needed,
              " bytes of signal pad, the allocation has ", view.signal_pad_size);
  TORCH_CHECK(peer >= -1 && peer < view.world_size, "MORI ", what, ": rank ", peer, " is outside the group of ",
              view.world_size);
}
}  // namespace

namespace {
// MORI_TORCH_BARRIER=kernel: every hdl.barrier runs the pad-protocol kernel.
bool KernelBarrierForced() {
  static const bool forced = [] {
    const char *s = std::getenv("MORI_TORCH_BARRIER");
    return s && std::string(s) == "kernel";
  }();
  return forced;
}
}  // namespace

// hdl.barrier(channel, timeout_ms):
//  - timeout_ms == 0 ("forever", torch's default) and channel < 8: stream
//    memory operations on the window's barrier area, no kernel launch (the
//    host cost of a launch dominated small all-to-alls; docs/performance.md);
//  - otherwise: a kernel on torch's signal-pad protocol that honours the
//    timeout and the abort flag.
// Neither leaves the signal pad non-zero, so torch's own kernels are unaffected.
void MoriSymmetricMemory::barrier(int channel, size_t timeout_ms) {
  state_->Check("barrier (an earlier wait)");
  CheckChannel(*this, view_, channel, -1, "barrier");
  c10::cuda::CUDAGuard guard(state_->device());
  auto stream = c10::cuda::getCurrentCUDAStream().stream();
  if (timeout_ms == 0 && !KernelBarrierForced() && state_->StreamBarrier(channel, stream)) return;
  int rc = mori_torch_launch_barrier(view_, channel, TimeoutNs(timeout_ms), stream);
  TORCH_CHECK(rc == 0, "MORI barrier: launch failed: ", mori_torch_launch_error());
}

void MoriSymmetricMemory::put_signal(int dst_rank, int channel, size_t timeout_ms) {
  state_->Check("put_signal (an earlier wait)");
  CheckChannel(*this, view_, channel, dst_rank, "put_signal");
  c10::cuda::CUDAGuard guard(state_->device());
  int rc = mori_torch_launch_put_signal(view_, dst_rank, channel, TimeoutNs(timeout_ms),
                                        c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(rc == 0, "MORI put_signal: launch failed: ", mori_torch_launch_error());
}

void MoriSymmetricMemory::wait_signal(int src_rank, int channel, size_t timeout_ms) {
  state_->Check("wait_signal (an earlier wait)");
  CheckChannel(*this, view_, channel, src_rank, "wait_signal");
  c10::cuda::CUDAGuard guard(state_->device());
  int rc = mori_torch_launch_wait_signal(view_, src_rank, channel, TimeoutNs(timeout_ms),
                                         c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(rc == 0, "MORI wait_signal: launch failed: ", mori_torch_launch_error());
}

}  // namespace mori_torch
