// SPDX-License-Identifier: MIT
#include "torch_backend/symmetric_memory.h"

#include <c10/core/DeviceGuard.h>

#include <cstdint>
#include <string>

#include "mori/runtime.h"
#include "mori/window_ops.h"
#include "torch_backend/device.h"

namespace mori_torch {

WindowState::~WindowState() {
  if (Finalized()) return;  // mori_finalize already released everything
  mori_window_destroy(win_);
}

std::shared_ptr<WindowState> WindowState::Own(mori_window_t *win, Group *group) {
  try {
    return std::make_shared<WindowState>(win, group);
  } catch (...) {
    if (!Finalized()) mori_window_destroy(win);  // as the destructor: finalize may have released it
    throw;
  }
}

void WindowState::Live(const char *what) const {
  TORCH_CHECK(!Finalized(), "MORI ", what, ": mori was finalized (mori.finalize() or the exit hook), which released ",
              "this handle's memory; the handle can no longer be used");
}

void WindowState::Check(const char *where) {
  int rc = mori_window_check(win_);
  TORCH_CHECK(rc == 0, "MORI ", where, ": ", mori_last_error());
}

void WindowState::FinishTimedOp(void *stream, const char *what) {
  int capturing = 0;
  int rc = mori_stream_capturing(device(), stream, &capturing);
  TORCH_CHECK(rc == 0, "MORI ", what, ": ", mori_last_error());
  if (capturing) return;
  rc = mori_stream_synchronize(device(), stream);
  TORCH_CHECK(rc == 0, "MORI ", what, ": ", mori_last_error());
  Check(what);
}

MoriSymmetricMemory::MoriSymmetricMemory(std::shared_ptr<WindowState> state, size_t offset)
    : state_(std::move(state)), offset_(offset) {
  mori_comm_t *comm = mori_window_comm(state_->win());
  int lsa_base = 0, lsa_size = 0, lsa_rank = 0;
  mori_comm_lsa(comm, &lsa_base, &lsa_size, &lsa_rank);
  rank_ = mori_comm_rank(comm);
  world_size_ = mori_comm_size(comm);
  lsa_is_world_ = lsa_size == world_size_;
}

std::vector<void *> MoriSymmetricMemory::get_buffer_ptrs() {
  state_->Live("get_buffer_ptrs");
  void *const *p = mori_window_ptrs(state_->win());
  return std::vector<void *>(p, p + get_world_size());
}

void MoriSymmetricMemory::CheckPadSize(const char *what) {
  size_t global = c10d::symmetric_memory::get_signal_pad_size(), mine = mori_window_signal_pad_size(state_->win());
  TORCH_CHECK(global <= mine, "MORI ", what, ": the signal pad size was raised to ", global,
              " bytes after this allocation's pads (", mine,
              " bytes) were made; call set_signal_pad_size before allocating");
}

std::vector<void *> MoriSymmetricMemory::get_signal_pad_ptrs() {
  state_->Live("get_signal_pad_ptrs");
  CheckPadSize("get_signal_pad_ptrs");
  void *const *p = mori_window_signal_pads(state_->win());
  if (!p) return std::vector<void *>(get_world_size(), nullptr);
  return std::vector<void *>(p, p + get_world_size());
}

void **MoriSymmetricMemory::get_buffer_ptrs_dev() {
  state_->Live("get_buffer_ptrs_dev");
  return const_cast<void **>(mori_window_ptrs_dev(state_->win()));
}

void **MoriSymmetricMemory::get_signal_pad_ptrs_dev() {
  state_->Live("get_signal_pad_ptrs_dev");
  CheckPadSize("get_signal_pad_ptrs_dev");
  return const_cast<void **>(mori_window_signal_pads_dev(state_->win()));
}

size_t MoriSymmetricMemory::get_buffer_size() {
  state_->Live("get_buffer_size");
  return mori_window_size(state_->win());
}

int *MoriSymmetricMemory::get_rank_to_global_rank_dev() {
  state_->Live("get_rank_to_global_rank_dev");
  return state_->rank_to_global_dev();
}
int MoriSymmetricMemory::get_rank() { return rank_; }
int MoriSymmetricMemory::get_world_size() { return world_size_; }
c10::Device MoriSymmetricMemory::get_device() { return GpuDevice(state_->device()); }
bool MoriSymmetricMemory::world_within_direct_access() { return lsa_is_world_; }

namespace {
// Saturates: a timeout too long to count in nanoseconds is as good as none.
uint64_t TimeoutNs(size_t timeout_ms) {
  return (uint64_t)timeout_ms > UINT64_MAX / 1000000ull ? UINT64_MAX : (uint64_t)timeout_ms * 1000000ull;
}
}  // namespace

// hdl.barrier / put_signal / wait_signal: stream-ordered kernels of the SDK
// (mori/window_ops.h). timeout_ms == 0 is torch's "no timeout": the SDK
// bounds it by MORI_UNTIMED_WAIT_MS (10 minutes unless set; 0 there is
// forever), and the next call on the handle raises what such a wait left.
// With a timeout, eager calls wait for their own completion and raise a
// RuntimeError naming the peer and channel, the GPU context intact. What an
// earlier wait left is raised after this call is launched, not before: the
// peers make their part (a barrier, the put a peer waits for), and a rank
// that raised first would leave them waiting out their timeouts, their
// channels a step ahead of this rank's (the fused ops do the same: ops.cc).
// A call with a timeout still waits for its own completion first, and an
// error of its own is raised with the earlier one in its message.
template <typename Launch>
void MoriSymmetricMemory::RunWindowOp(const char *what, bool uses_pads, size_t timeout_ms, Launch launch) {
  state_->Live(what);
  if (uses_pads) CheckPadSize(what);  // (before the mailbox is read: its record stays for the next call)
  std::string earlier;
  if (mori_window_check(state_->win()) != 0) earlier = mori_last_error();
  const std::string also = earlier.empty() ? "" : "; an earlier wait had failed too: " + earlier;
  c10::DeviceGuard guard(GpuDevice(state_->device()));
  void *stream = CurrentStream(state_->device());
  int rc = launch(state_->win(), TimeoutNs(timeout_ms), stream);
  TORCH_CHECK(rc == 0, "MORI ", what, ": ", mori_last_error(), also);
  if (timeout_ms) {
    try {
      state_->FinishTimedOp(stream, what);
    } catch (const c10::Error &e) {
      if (earlier.empty()) throw;
      TORCH_CHECK(false, e.what_without_backtrace(), also);
    }
  }
  TORCH_CHECK(earlier.empty(), "MORI ", what, " (an earlier wait): ", earlier);
}

void MoriSymmetricMemory::barrier(int channel, size_t timeout_ms) {
  RunWindowOp("barrier", false, timeout_ms, [&](mori_window_t *win, uint64_t timeout_ns, void *stream) {
    return mori_window_barrier(win, channel, timeout_ns, stream);
  });
}

void MoriSymmetricMemory::put_signal(int dst_rank, int channel, size_t timeout_ms) {
  RunWindowOp("put_signal", true, timeout_ms, [&](mori_window_t *win, uint64_t timeout_ns, void *stream) {
    return mori_window_put_signal(win, dst_rank, channel, timeout_ns, stream);
  });
}

void MoriSymmetricMemory::wait_signal(int src_rank, int channel, size_t timeout_ms) {
  RunWindowOp("wait_signal", true, timeout_ms, [&](mori_window_t *win, uint64_t timeout_ns, void *stream) {
    return mori_window_wait_signal(win, src_rank, channel, timeout_ns, stream);
  });
}

}  // namespace mori_torch
