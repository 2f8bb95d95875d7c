#include "torch_backend/symmetric_memory.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdlib>
#include <string>

#include "mori/runtime.h"
#include "mori/device/barrier.h"
#include "torch_backend/signal_kernels.h"

namespace mori_torch {

WindowState::WindowState(mori_window_t *win, int device, std::vector<int> rank_to_global, int *rank_to_global_dev)
    : win_(win), device_(device), rank_to_global_(std::move(rank_to_global)), rank_to_global_dev_(rank_to_global_dev) {}

WindowState::~WindowState() {
  if (Finalized()) return;  // mori_finalize already released everything
  mori_window_destroy(win_);
  mori_device_free(device_, rank_to_global_dev_);
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

// hdl.barrier(channel, timeout_ms): one small kernel running the device
// API's barrier (mori_barrier_block) on the window's barrier area: epochs
// kept in device memory (so a captured graph replays correctly), one release
// store per peer, no round trips. It leaves the signal pad alone, so torch's
// own kernels, which synchronise through the pad, are unaffected.
void MoriSymmetricMemory::barrier(int channel, size_t timeout_ms) {
  state_->Check("barrier (an earlier wait)");
  TORCH_CHECK(channel >= 0 && channel < MORI_BARRIER_CHANNELS, "MORI barrier: channel ", channel, " is outside [0, ",
              MORI_BARRIER_CHANNELS, ")");
  c10::cuda::CUDAGuard guard(state_->device());
  int rc = mori_torch_launch_barrier(view_, channel, TimeoutNs(timeout_ms), c10::cuda::getCurrentCUDAStream().stream());
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
