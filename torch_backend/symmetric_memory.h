// The SymmetricMemory handle torch sees for one (allocation, group): a view
// of a mori window, plus the offset of the pointer torch rendezvoused with.
#pragma once

#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <memory>
#include <string>
#include <vector>

#include "mori/window.h"

namespace mori_torch {

// One rendezvoused window; shared by the handles of interior pointers.
// Destroying it is local (never collective), and does nothing once the
// process has been finalized (the GPU runtime may be gone).
class WindowState {
 public:
  WindowState(mori_window_t *win, int device, std::vector<int> rank_to_global, int *rank_to_global_dev);
  ~WindowState();
  mori_window_t *win() const { return win_; }
  int device() const { return device_; }
  const std::vector<int> &rank_to_global() const { return rank_to_global_; }
  int *rank_to_global_dev() const { return rank_to_global_dev_; }
  // Throws with the kernel's error record if a device-side wait failed.
  void Check(const char *where);

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
  int *get_rank_to_global_rank_dev() override { return state_->rank_to_global_dev(); }
  bool world_within_direct_access() override;

 private:
  std::shared_ptr<WindowState> state_;
  size_t offset_;
  mori_window_dev_t view_;
};

// Set by the exit hook: from then on nothing touches the GPU runtime.
bool Finalized();

}  // namespace mori_torch
