// SPDX-License-Identifier: MIT
// The "MORI" SymmetricMemoryAllocator: registered when this library is
// loaded (import mori.allocator), kept alive forever (torch's registry
// outlives our statics), and finalized from Python's exit hook while the GPU
// runtime is still up. Device-generic: devices and streams through c10's
// device-guard interface, all GPU work through mori's C API.
#include "torch_backend/allocator.h"

#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>
#include <torch/headeronly/version.h>

#include <atomic>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "mori/mem.h"
#include "mori/runtime.h"
#include "torch_backend/build_info.h"
#include "torch_backend/device.h"
#include "torch_backend/plugins.h"
#include "torch_backend/symmetric_memory.h"

namespace mori_torch {

namespace {
std::atomic<bool> finalized{false};
}
bool Finalized() { return finalized.load(); }

namespace {

using c10d::symmetric_memory::SymmetricMemory;

class MoriAllocator : public c10d::symmetric_memory::SymmetricMemoryAllocator {
 public:
  void *alloc(size_t size, int device_idx, const std::optional<std::string> &group_name) override {
    TORCH_CHECK(!Finalized(), "MORI: alloc after finalization");
    int device = device_idx >= 0 ? device_idx : CurrentDevice();
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.device = device;
    attr.signal_pad_size = c10d::symmetric_memory::get_signal_pad_size();
    void *ptr = nullptr;
    int rc = mori_mem_alloc(size, &attr, &ptr);
    TORCH_CHECK(rc == 0, "MORI alloc of ", size, " bytes on cuda:", device, ": ", mori_last_error());
    std::lock_guard<std::mutex> lock(mutex_);
    if (group_name) alloc_group_[ptr] = *group_name;
    return ptr;
  }

  void free(void *ptr) override {
    if (Finalized()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Drop cached handles of this allocation (the pointers rendezvous was
      // given inside it, indexed by its base); live Python handles keep the
      // window (and so the memory) until they go.
      auto keys = handle_ptrs_.find(ptr);
      if (keys != handle_ptrs_.end()) {
        for (void *key : keys->second) handles_.erase(key);
        handle_ptrs_.erase(keys);
      }
      handles_.erase(ptr);
      for (auto it = windows_.lower_bound(std::make_tuple(ptr, std::string(), INT_MIN));
           it != windows_.end() && std::get<0>(it->first) == ptr;)
        it = windows_.erase(it);
      alloc_group_.erase(ptr);
    }
    // torch calls this from the storage's deleter, which must not throw
    // (an exception there ends the process): a failure is warned about.
    if (mori_mem_free(ptr) != 0) TORCH_WARN("MORI free(", ptr, "): ", mori_last_error());
  }

  size_t get_alloc_size(void *ptr) override {
    mori_mem_info_t info;
    int rc = mori_mem_query(ptr, &info);
    TORCH_CHECK(rc == 0, "MORI get_alloc_size: ", mori_last_error());
    return info.size;
  }

  c10::intrusive_ptr<SymmetricMemory> rendezvous(void *ptr, const std::optional<std::string> &group_name) override {
    // torch calls this on every op: a cached (pointer, group) is one hash
    // lookup, without touching mori's registry.
    if (group_name) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto hit = handles_.find(ptr);
      if (hit != handles_.end())
        for (auto &entry : hit->second)
          if (entry.first == *group_name) return entry.second;
    }
    mori_mem_info_t info;
    if (mori_mem_query(ptr, &info) != 0) return {};  // not ours: torch falls back
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!Finalized(), "MORI: rendezvous after finalization");
    std::string group;
    if (group_name) {
      group = *group_name;
    } else {
      auto it = alloc_group_.find(info.base);
      TORCH_CHECK(it != alloc_group_.end(), "MORI rendezvous: no group name given at alloc or rendezvous");
      group = it->second;
    }
    auto known = handles_.find(ptr);
    if (known != handles_.end())
      for (auto &entry : known->second)
        if (entry.first == group) return entry.second;

    std::shared_ptr<WindowState> state;
    auto key = std::make_tuple(info.base, group, info.device);
    auto w = windows_.find(key);
    if (w != windows_.end()) {
      state = w->second;
    } else {
      // One collective step when the group's devices are those of its last
      // agreement (group.cc says why every rank then takes the same path).
      Group *g = nullptr;
      mori_window_t *win = nullptr;
      int rc = groups_.CreateWindow(group, info.device, info.base, &g, &win);
      TORCH_CHECK(rc == 0, "MORI rendezvous on group '", group, "' (cuda:", info.device, "): ", mori_last_error());
      state = WindowState::Own(win, g);
      windows_[key] = state;
    }
    c10::intrusive_ptr<SymmetricMemory> handle = c10::make_intrusive<MoriSymmetricMemory>(state, info.offset);
    auto &cached = handles_[ptr];
    if (cached.empty()) handle_ptrs_[info.base].push_back(ptr);
    cached.emplace_back(group, handle);
    return handle;
  }

  bool has_multicast_support(int) override { return false; }
  c10::DeviceType supported_device_type() override { return kDeviceType; }
  std::string name() override { return "MORI"; }

  std::shared_ptr<WindowState> WindowOf(const void *ptr, const std::string &name, int device, size_t *offset) {
    mori_mem_info_t info;
    if (mori_mem_query(ptr, &info) != 0) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    if (Finalized()) return nullptr;
    auto w = windows_.find(std::make_tuple(info.base, name, device));
    if (w == windows_.end()) return nullptr;
    *offset = info.offset;
    return w->second;
  }

  Group &GroupFor(const std::string &name, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!Finalized(), "MORI: collective op after finalization");
    return groups_.Get(name, device, /*agree=*/false);
  }

  Group *ExistingGroupFor(const std::string &name, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return Finalized() ? nullptr : groups_.Find(name, device);
  }

  int CreateWindow(const std::string &name, int device, void *ptr, Group **group, mori_window_t **out) {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!Finalized(), "MORI: window on group '", name, "' after finalization");
    return groups_.CreateWindow(name, device, ptr, group, out);
  }

  void Finalize() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finalized) return;
    // Collective contexts are windows: destroyed while windows still are.
    groups_.ReleaseColls();
    finalized = true;
    // Handles Python still holds become inert; mori releases everything in
    // order while the runtime is alive; then the comms.
    handles_.clear();
    handle_ptrs_.clear();
    windows_.clear();
    mori_finalize();
    groups_.ReleaseAll();
  }

 private:
  std::mutex mutex_;
  std::map<void *, std::string> alloc_group_;
  Groups groups_;
  std::map<std::tuple<void *, std::string, int>, std::shared_ptr<WindowState>> windows_;
  // Handles by the pointer torch passes, one per group.
  std::unordered_map<void *, std::vector<std::pair<std::string, c10::intrusive_ptr<SymmetricMemory>>>> handles_;
  // The keys of handles_ by allocation base: free finds its handles in
  // constant time instead of querying every cached pointer.
  std::unordered_map<void *, std::vector<void *>> handle_ptrs_;
};

// Never destroyed: torch's registry keeps a reference past our statics.
MoriAllocator *TheAllocator() {
  static MoriAllocator *allocator = [] {
    auto ptr = c10::make_intrusive<MoriAllocator>();
    MoriAllocator *raw = ptr.get();
    c10::raw::intrusive_ptr::incref(raw);  // one reference forever
    c10d::symmetric_memory::register_availability("MORI", ptr);
    return raw;
  }();
  return allocator;
}

struct Registration {
  Registration() { TheAllocator(); }
} registration;

}  // namespace

Group &GroupFor(const std::string &name, int device) { return TheAllocator()->GroupFor(name, device); }
Group *ExistingGroupFor(const std::string &name, int device) { return TheAllocator()->ExistingGroupFor(name, device); }
int CreateWindow(const std::string &name, int device, void *ptr, Group **group, mori_window_t **out) {
  return TheAllocator()->CreateWindow(name, device, ptr, group, out);
}

std::shared_ptr<WindowState> WindowOf(const void *ptr, const std::string &name, int device, size_t *offset) {
  return TheAllocator()->WindowOf(ptr, name, device, offset);
}

}  // namespace mori_torch

// Plain C entry points (ctypes from the Python package; the MemPool shim):
// no Python ABI, so one build serves every Python of a torch minor release.
extern "C" __attribute__((visibility("default"))) void mori_torch_finalize(void) {
  mori_torch::TheAllocator()->Finalize();
}

extern "C" __attribute__((visibility("default"))) void *mori_torch_alloc(size_t size, int device) {
  return mori_torch::TheAllocator()->alloc(size, device, std::nullopt);
}

extern "C" __attribute__((visibility("default"))) void mori_torch_free(void *ptr) {
  mori_torch::TheAllocator()->free(ptr);
}

extern "C" __attribute__((visibility("default"))) const char *mori_torch_build_info(void) {
  static const std::string info = mori_torch::FormatBuildInfo(
      mori_runtime_platform(), (std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR)).c_str(),
      mori_torch::kHandles, mori_torch::kNumHandles, mori_torch::kTransports, mori_torch::kNumTransports,
      mori_torch::kOpSchemas, mori_torch::kNumOps);
  return info.c_str();
}
