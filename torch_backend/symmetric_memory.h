// SPDX-License-Identifier: MIT
// The SymmetricMemory handle torch sees for one (allocation, group): a view
// of a mori window, plus the offset of the pointer torch rendezvoused with.
#pragma once

#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <memory>
#include <string>
#include <vector>

#include "mori/window.h"
#include "torch_backend/group.h"

namespace mori_torch {

// One rendezvoused window; shared by the handles of interior pointers.
// Destroying it is local (never collective), safe from any thread (Python
// drops handles from its garbage collector), and does nothing once the
// process has been finalized (the GPU runtime may be gone). What it keeps
// of its group is copied: finalization frees the groups while Python may
// still hold handles.
class WindowState {
 public:
  WindowState(mori_window_t *win, Group *group)
      : win_(win), device_(group->device), rank_to_global_(group->rank_to_global),
        rank_to_global_dev_(group->rank_to_global_dev) {}
  ~WindowState();
  // Takes `win` over: if the state cannot be allocated, the window is
  // destroyed before the exception leaves (nothing else would free it).
  static std::shared_ptr<WindowState> Own(mori_window_t *win, Group *group);
  mori_window_t *win() const { return win_; }
  int device() const { return device_; }
  const std::vector<int> &rank_to_global() const { return rank_to_global_; }
  int *rank_to_global_dev() const { return rank_to_global_dev_; }
  // Throws, naming `what`, once mori was finalized (mori.finalize() or the
  // exit hook): the window, its pads and the group's device table are gone,
  // and the handle Python still holds would read freed memory.
  void Live(const char *what) const;
  // Throws with the kernel's error record if a device-side wait failed.
  void Check(const char *where);
  // After an op given a timeout: in eager mode wait for it on the host and
  // raise if it timed out; under graph capture the mailbox keeps the record
  // for the next call.
  void FinishTimedOp(void *stream, const char *what);

 private:
  mori_window_t *win_;
  int device_;
  std::vector<int> rank_to_global_;
  int *rank_to_global_dev_;
};

class MoriSymmetricMemory : public c10d::symmetric_memory::SymmetricMemory {
 public:
  MoriSymmetricMemory(std::shared_ptr<WindowState> state, size_t offset);

  std::vector<void *> get_buffer_ptrs() override;
  std::vector<void *> get_signal_pad_ptrs() override;
  void **get_buffer_ptrs_dev() override;
  void **get_signal_pad_ptrs_dev() override;
  size_t get_buffer_size() override;
  size_t get_offset() override { return offset_; }
  bool has_multicast_support() override { return false; }
  void *get_multicast_ptr() override { return nullptr; }
  void barrier(int channel, size_t timeout_ms) override;
  void put_signal(int dst_rank, int channel, size_t timeout_ms) override;
  void wait_signal(int src_rank, int channel, size_t timeout_ms) override;
  int get_rank() override;
  int get_world_size() override;
  c10::Device get_device() override;
  const std::vector<int> &get_rank_to_global_rank() override { return state_->rank_to_global(); }
  int *get_rank_to_global_rank_dev() override;
  bool world_within_direct_access() override;

 private:
  // torch reads the pads through the global signal-pad size; refuse when it
  // was raised after this handle's pads were made (they would be overrun).
  void CheckPadSize(const char *what);
  // One stream-ordered window op (barrier, put_signal, wait_signal): the
  // checks, the launch on the current stream, and with a timeout the wait
  // for its own completion. launch(win, timeout_ns, stream) returns mori's rc.
  template <typename Launch>
  void RunWindowOp(const char *what, bool uses_pads, size_t timeout_ms, Launch launch);

  std::shared_ptr<WindowState> state_;
  size_t offset_;
  // From the comm, not the device view: asking for the view would wait for
  // the window's device tables, which only the device-pointer getters need.
  int rank_, world_size_;
  bool lsa_is_world_;
};

// Set by the exit hook: from then on nothing touches the GPU runtime.
bool Finalized();

}  // namespace mori_torch
