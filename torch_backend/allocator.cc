// The "MORI" SymmetricMemoryAllocator: registered when this library is
// loaded (import mori.allocator), kept alive forever (torch's registry
// outlives our statics), and finalized from Python's exit hook while the GPU
// runtime is still up.
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>
#include <torch/headeronly/version.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "mori/handle_fabric.h"
#include "mori/handle_posix_fd.h"
#include "mori/mem.h"
#include "mori/runtime.h"
#include "mori/transport_p2p.h"
#include "torch_backend/store_bootstrap.h"
#include "torch_backend/symmetric_memory.h"

namespace mori_torch {

namespace {
std::atomic<bool> finalized{false};
}
bool Finalized() { return finalized.load(); }

namespace {

using c10d::symmetric_memory::SymmetricMemory;

// One comm per group, created at the group's first rendezvous and kept for
// the life of the process (its store keys count on from where they were).
struct Group {
  mori_bootstrap_t *bootstrap = nullptr;
  mori_comm_t *comm = nullptr;
  std::vector<int> rank_to_global;
};

class MoriAllocator : public c10d::symmetric_memory::SymmetricMemoryAllocator {
 public:
  void *alloc(size_t size, int device_idx, const std::optional<std::string> &group_name) override {
    TORCH_CHECK(!Finalized(), "MORI: alloc after finalization");
    int device = device_idx >= 0 ? device_idx : c10::cuda::current_device();
    c10::cuda::CUDAGuard guard(device);
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
      // Drop cached handles of this allocation; live Python handles keep the
      // window (and so the memory) until they go.
      for (auto it = handles_.begin(); it != handles_.end();) {
        mori_mem_info_t info;
        bool ours = mori_mem_query(it->first, &info) == 0 && info.base == ptr;
        it = ours ? handles_.erase(it) : std::next(it);
      }
      for (auto it = windows_.begin(); it != windows_.end();)
        it = it->first.first == ptr ? windows_.erase(it) : std::next(it);
      alloc_group_.erase(ptr);
    }
    int rc = mori_mem_free(ptr);
    TORCH_CHECK(rc == 0, "MORI free(", ptr, "): ", mori_last_error());
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
    std::string group;
    if (group_name) {
      group = *group_name;
    } else {
      auto it = alloc_group_.find(info.base);
      TORCH_CHECK(it != alloc_group_.end(), "MORI rendezvous: no group name given at alloc or rendezvous");
      group = it->second;
    }
    for (auto &entry : handles_[ptr])
      if (entry.first == group) return entry.second;

    std::shared_ptr<WindowState> state;
    auto w = windows_.find({info.base, group});
    if (w != windows_.end()) {
      state = w->second;
    } else {
      Group &g = GroupFor(group);
      c10::cuda::CUDAGuard guard(info.device);
      mori_window_t *win = nullptr;
      int rc = mori_window_create(g.comm, info.base, &win);
      TORCH_CHECK(rc == 0, "MORI rendezvous on group '", group, "': ", mori_last_error());
      int *r2g_dev = nullptr;
      size_t bytes = g.rank_to_global.size() * sizeof(int);
      rc = mori_device_alloc(info.device, bytes, (void **)&r2g_dev);
      if (!rc) rc = mori_device_copy(info.device, r2g_dev, g.rank_to_global.data(), bytes);
      TORCH_CHECK(rc == 0, "MORI rendezvous: ", mori_last_error());
      state = std::make_shared<WindowState>(win, info.device, g.rank_to_global, r2g_dev);
      windows_[{info.base, group}] = state;
    }
    c10::intrusive_ptr<SymmetricMemory> handle = c10::make_intrusive<MoriSymmetricMemory>(state, info.offset);
    handles_[ptr].emplace_back(group, handle);
    return handle;
  }

  bool has_multicast_support(int) override { return false; }
  c10::DeviceType supported_device_type() override { return c10::DeviceType::CUDA; }
  std::string name() override { return "MORI"; }

  void Finalize() {
    std::lock_guard<std::mutex> lock(mutex_);
    finalized = true;
    // Handles Python still holds become inert; mori releases everything in
    // order while the runtime is alive.
    handles_.clear();
    windows_.clear();
    mori_finalize();
  }

 private:
  Group &GroupFor(const std::string &name) {
    auto it = groups_.find(name);
    if (it != groups_.end()) return it->second;
    int rank = -1, size = 0;
    c10::intrusive_ptr<c10d::Store> store;
    try {
      auto &info = c10d::symmetric_memory::get_group_info(name);
      rank = info.rank;
      size = info.world_size;
      store = info.store;
    } catch (const std::exception &) {
      auto pg = c10d::resolve_process_group(name);
      TORCH_CHECK(pg, "MORI: unknown group '", name, "'");
      rank = pg->getRank();
      size = pg->getSize();
      store = pg->getStore();
    }
    Group g;
    int rc = CreateStoreBootstrap(store, name, rank, size, &g.bootstrap);
    TORCH_CHECK(rc == 0, "MORI group '", name, "': ", mori_last_error());
    static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops};
    static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops};
    mori_comm_attr_t attr;
    mori_comm_attr_init(&attr);
    attr.bootstrap = g.bootstrap;
    attr.device = c10::cuda::current_device();
    attr.handles = handles;
    attr.num_handles = 2;
    attr.transports = transports;
    attr.num_transports = 1;
    rc = mori_comm_create(&attr, &g.comm);
    TORCH_CHECK(rc == 0, "MORI group '", name, "' (rank ", rank, " of ", size, "): ", mori_last_error());
    // Global ranks: RANK from the launcher, else the rank in this group.
    int32_t global = std::getenv("RANK") ? std::atoi(std::getenv("RANK")) : rank;
    g.rank_to_global.resize(size);
    rc = mori_bootstrap_allgather(g.bootstrap, &global, g.rank_to_global.data(), sizeof(int32_t));
    TORCH_CHECK(rc == 0, "MORI group '", name, "': ", mori_last_error());
    return groups_.emplace(name, std::move(g)).first->second;
  }

  std::mutex mutex_;
  std::map<void *, std::string> alloc_group_;
  std::map<std::string, Group> groups_;
  std::map<std::pair<void *, std::string>, std::shared_ptr<WindowState>> windows_;
  // Handles by the pointer torch passes, one per group.
  std::unordered_map<void *, std::vector<std::pair<std::string, c10::intrusive_ptr<SymmetricMemory>>>> handles_;
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

// torch.cuda.MemPool-backed symmetric tensors (symm_mem.get_mem_pool).
void RegisterMemPoolAllocator() {
  auto pool = torch::cuda::CUDAPluggableAllocator::createCustomAllocator(
      [](size_t size, int device, cudaStream_t) { return TheAllocator()->alloc(size, device, std::nullopt); },
      [](void *ptr, size_t, int, cudaStream_t) { TheAllocator()->free(ptr); });
  c10d::symmetric_memory::register_mempool_allocator(c10::DeviceType::CUDA, pool);
}

struct Registration {
  Registration() {
    TheAllocator();
    RegisterMemPoolAllocator();
  }
} registration;

}  // namespace
}  // namespace mori_torch

// Plain C entry points for the Python package (ctypes): no Python ABI, so one
// build serves every Python version of a torch minor release.
extern "C" __attribute__((visibility("default"))) void mori_torch_finalize(void) {
  if (!mori_torch::Finalized()) mori_torch::TheAllocator()->Finalize();
}

extern "C" __attribute__((visibility("default"))) const char *mori_torch_build_info(void) {
  static std::string info = std::string("platform=") + mori_runtime_platform() + " torch=" +
                            std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) +
                            " handles=posix_fd,fabric transports=p2p";
  return info.c_str();
}
