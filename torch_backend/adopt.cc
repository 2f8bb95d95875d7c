// SPDX-License-Identifier: MIT
// torch.ops.mori.adopt / release: tensors mori did not allocate — from
// torch's caching allocator (cudaMalloc underneath) or another symmetric
// backend (torch's default one maps with the virtual-memory API) — made
// reachable by the group's peers without a copy. Adopt is collective over
// the group: it registers the tensor's storage (mori_mem_register for a
// virtual-memory mapping, mori_mem_register_range — legacy IPC handles —
// otherwise), makes a window of it and returns the address of every rank's
// storage as seen from here (int64 on the tensor's device; 0 where a rank
// is not load/store reachable). The window lives until release (local) or
// finalization; the tensor's memory must stay alive that long, which the
// Python side (mori.address_map.adopt) ensures by holding the tensor.
#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "mori/comm.h"
#include "mori/mem.h"
#include "mori/window.h"
#include "torch_backend/allocator.h"
#include "torch_backend/device.h"

namespace mori_torch {
namespace {

struct Adopted {
  std::shared_ptr<WindowState> window;
  bool registered_here = false;  // registered by adopt (unregistered at release), not MORI's own memory
  void *root = nullptr;
};

// (storage root, group, device) -> what adopt made. Never destroyed: at
// exit mori_finalize (or the process) releases what is left.
std::mutex adopted_lock;
std::map<std::tuple<void *, std::string, int>, Adopted> &AdoptedTable() {
  static auto *table = new std::map<std::tuple<void *, std::string, int>, Adopted>();
  return *table;
}

// Registers [root, root + bytes) if it is not mori memory yet; true when
// this call registered it. A failure is left for the window to report: the
// rank still takes part in the rendezvous, so every rank fails together.
bool Register(void *root, size_t bytes, int device, std::string *why) {
  mori_mem_info_t info;
  if (mori_mem_query(root, &info) == 0) return false;  // MORI's own memory, or adopted on another group
  mori_mem_attr_t attr;
  mori_mem_attr_init(&attr);
  attr.device = device;
  void *base = nullptr;
  int rc = mori_mem_register(root, &attr, &base);  // a virtual-memory mapping (the default backend's)
  if (rc == 0) return true;
  std::string vmm = mori_last_error();
  rc = mori_mem_register_range(root, bytes, &attr);  // cudaMalloc memory (the caching allocator's)
  if (rc == 0) return true;
  *why = std::string(mori_last_error()) + " (as a virtual-memory mapping: " + vmm + ")";
  return false;
}

// A registration Register made, given back when the guard goes unless the
// adoption took it over (owned cleared).
struct RegistrationGuard {
  void *root;
  bool owned;
  RegistrationGuard(void *registered_root, bool registered) : root(registered_root), owned(registered) {}
  RegistrationGuard(const RegistrationGuard &) = delete;
  RegistrationGuard &operator=(const RegistrationGuard &) = delete;
  ~RegistrationGuard() {
    if (owned) mori_mem_free(root);
  }
};

at::Tensor Adopt(const at::Tensor &t, std::string group) {
  TORCH_CHECK(t.device().type() == kDeviceType, "MORI adopt: the tensor is on ", t.device(), ", not a GPU");
  const int device = t.device().index();
  c10::DeviceGuard guard(t.device());
  void *root = t.storage().data_ptr().get();
  const size_t bytes = t.storage().nbytes();
  TORCH_CHECK(root && bytes, "MORI adopt: the tensor has no storage");
  auto key = std::make_tuple(root, group, device);
  {
    std::lock_guard<std::mutex> lock(adopted_lock);
    TORCH_CHECK(!AdoptedTable().count(key), "MORI adopt: the storage at ", root, " is already adopted on group '", group,
                "' (release it first)");
  }
  std::string why;
  // Owns the registration adopt makes until the table holds the adoption:
  // any failure below (the window, a query, the allgather, the table's
  // device copy) gives it back, after the window (declared later) is gone.
  RegistrationGuard registration{root, Register(root, bytes, device, &why)};
  Group *g = nullptr;
  mori_window_t *win = nullptr;
  int rc = CreateWindow(group, device, root, &g, &win);  // collective; fails on every rank if one could not register
  if (rc != 0) {
    std::string err = mori_last_error();
    TORCH_CHECK(false, "MORI adopt on group '", group, "' (rank ", mori_comm_rank(g->comm), ", ", bytes, " bytes at ", root,
                "): ", why.empty() ? "" : why + "; ", err);
  }
  auto state = WindowState::Own(win, g);
  // Every rank's storage root: the window's table holds each rank's
  // registered base, and the storage may sit at a different offset of it.
  mori_mem_info_t info;
  rc = mori_mem_query(root, &info);
  TORCH_CHECK(rc == 0, "MORI adopt: ", mori_last_error());
  const int world = mori_comm_size(g->comm);
  uint64_t mine = info.offset;
  std::vector<uint64_t> offsets(static_cast<size_t>(world));
  rc = mori_comm_allgather(g->comm, &mine, offsets.data(), sizeof(mine));
  TORCH_CHECK(rc == 0, "MORI adopt on group '", group, "': ", mori_last_error());
  void *const *ptrs = mori_window_ptrs(win);
  std::vector<int64_t> roots(static_cast<size_t>(world));
  for (int p = 0; p < world; p++)
    roots[p] = ptrs[p] ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(ptrs[p]) + offsets[p]) : 0;
  at::Tensor table = at::tensor(roots, at::TensorOptions().dtype(at::kLong)).to(t.device());
  // The entry goes in last, so a failure above leaves nothing adopted and a
  // later adopt of the storage is not refused as adopted already.
  std::lock_guard<std::mutex> lock(adopted_lock);
  AdoptedTable()[key] = Adopted{state, registration.owned, root};
  registration.owned = false;  // the table's now: Release gives it back
  return table;
}

void Release(const at::Tensor &t, std::string group) {
  void *root = t.storage().data_ptr().get();
  auto key = std::make_tuple(root, group, static_cast<int>(t.device().index()));
  Adopted a;
  {
    std::lock_guard<std::mutex> lock(adopted_lock);
    auto it = AdoptedTable().find(key);
    TORCH_CHECK(it != AdoptedTable().end(), "MORI release: the storage at ", root, " is not adopted on group '", group, "'");
    a = std::move(it->second);
    AdoptedTable().erase(it);
  }
  a.window.reset();  // window destroyed (after the device is idle)
  if (a.registered_here && !Finalized()) mori_mem_free(a.root);
}

}  // namespace
}  // namespace mori_torch

TORCH_LIBRARY_FRAGMENT(mori, m) {
  m.def("adopt(Tensor t, str group_name) -> Tensor");
  m.def("release(Tensor t, str group_name) -> ()");
}

TORCH_LIBRARY_IMPL(mori, CUDA, m) {
  m.impl("adopt", mori_torch::Adopt);
  m.impl("release", mori_torch::Release);
}

// A CPU tensor reaches Adopt too, to be refused with mori's own message.
TORCH_LIBRARY_IMPL(mori, CPU, m) { m.impl("adopt", mori_torch::Adopt); }
