// SPDX-License-Identifier: MIT
// torch.ops.mori.contiguous_view, torch.ops.mori.locality and
// torch.ops.mori.barrier_area: views of a MORI symmetric tensor's window
// that torch's SymmetricMemory interface has no place for. Both are read off the window the tensor was rendezvoused
// with (never collective) and alias mori's memory without copying: the
// contiguous view is the window's flat span (every rank's copy of the
// tensor, one tensor of shape [world, *shape]) and keeps the window alive
// while it lives; the locality table is the comm's, which lives as long as
// the group. Eager only: they return aliases of memory torch does not own.
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "mori/locality.h"
#include "mori/window.h"
#include "torch_backend/allocator.h"
#include "torch_backend/device.h"

namespace mori_torch {
namespace {

// The window `t` was rendezvoused with on `group`, and t's offset in it.
std::shared_ptr<WindowState> WindowFor(const at::Tensor &t, const std::string &group, const char *op, size_t *offset) {
  TORCH_CHECK(t.device().type() == kDeviceType, "MORI ", op, ": the tensor is on ", t.device(), ", not a GPU");
  std::shared_ptr<WindowState> win = WindowOf(t.data_ptr(), group, t.device().index(), offset);
  TORCH_CHECK(win, "MORI ", op, ": the tensor at ", t.data_ptr(), " on ", t.device(),
              " is not MORI symmetric memory rendezvoused on group '", group,
              "' (allocate it with symm_mem.empty under the MORI backend and call symm_mem.rendezvous first)");
  return win;
}

at::Tensor ContiguousView(const at::Tensor &t, std::string group) {
  size_t offset = 0;
  std::shared_ptr<WindowState> win = WindowFor(t, group, "contiguous_view", &offset);
  mori_flat_span_t span;
  int rc = mori_window_flat_span(win->win(), &span);
  TORCH_CHECK(rc == 0, "MORI contiguous_view on group '", group, "': ", mori_last_error());
  const int64_t esize = static_cast<int64_t>(t.element_size());
  TORCH_CHECK(span.stride % static_cast<uint64_t>(esize) == 0, "MORI contiguous_view on group '", group,
              "': the ranks' copies are ", span.stride, " bytes apart, not a multiple of the ", esize,
              "-byte element size of ", t.scalar_type());
  // The tensor lies inside its allocation on this rank, and the allocation
  // has the same size on every rank (the rendezvous checked), so each
  // rank's row stays inside that rank's slot of the span.
  std::vector<int64_t> sizes{static_cast<int64_t>(span.world_size)}, strides{static_cast<int64_t>(span.stride) / esize};
  for (int64_t d = 0; d < t.dim(); d++) {
    sizes.push_back(t.size(d));
    strides.push_back(t.stride(d));
  }
  // Where the tensor starts in its allocation (a view may start anywhere
  // in it), the same place in rank 0's slot of the span.
  const uintptr_t into =
      reinterpret_cast<uintptr_t>(t.data_ptr()) - reinterpret_cast<uintptr_t>(mori_window_local_ptr(win->win()));
  void *first = reinterpret_cast<void *>(static_cast<uintptr_t>(span.base) + into);
  return at::for_blob(first, sizes)
      .strides(strides)
      .deleter([win](void *) mutable { win.reset(); })
      .target_device(t.device())
      .options(t.options())
      .make_tensor();
}

at::Tensor Locality(const at::Tensor &t, std::string group) {
  size_t offset = 0;
  std::shared_ptr<WindowState> win = WindowFor(t, group, "locality", &offset);
  mori_comm_t *comm = mori_window_comm(win->win());
  const uint32_t *table = nullptr;
  int rc = mori_comm_locality_dev(comm, &table);
  TORCH_CHECK(rc == 0, "MORI locality on group '", group, "': ", mori_last_error());
  // int32 carries the uint32 words bit for bit (torch's uint32 has few ops).
  return at::for_blob(const_cast<uint32_t *>(table), {static_cast<int64_t>(mori_comm_size(comm))})
      .target_device(t.device())
      .options(t.options().dtype(at::kInt))
      .make_tensor();
}

// This rank's barrier area of the window the tensor was rendezvoused with
// (mori/device/impl/window__types.h): int64 words in device memory, word
// c * lsa_size + i the epoch LSA rank i last stored here for channel c,
// word MORI_BARRIER_CHANNELS * lsa_size + c the barriers this rank has
// completed on channel c. For diagnosing a barrier that does not end: read
// it on a stream of its own (the waiting kernel holds the current one), and
// the waiting kernel's epoch is its counter + 1 and the peers whose word is
// below that are the ones it waits for. Keeps the window alive.
at::Tensor BarrierArea(const at::Tensor &t, std::string group) {
  size_t offset = 0;
  std::shared_ptr<WindowState> win = WindowFor(t, group, "barrier_area", &offset);
  mori_window_dev_t v = mori_window_device_view(win->win());
  TORCH_CHECK(v.barrier_base, "MORI barrier_area on group '", group, "': the window has no barrier area");
  uint64_t mine = v.barrier_base + static_cast<uint64_t>(v.lsa_rank) * v.barrier_stride;
  void *area = reinterpret_cast<void *>(static_cast<uintptr_t>(mine));
  const int64_t words = static_cast<int64_t>(MORI_BARRIER_CHANNELS) * (v.lsa_size + 1);
  return at::for_blob(area, {words})
      .deleter([win](void *) mutable { win.reset(); })
      .target_device(t.device())
      .options(t.options().dtype(at::kLong))
      .make_tensor();
}

}  // namespace
}  // namespace mori_torch

TORCH_LIBRARY_FRAGMENT(mori, m) {
  m.def("contiguous_view(Tensor t, str group_name) -> Tensor");
  m.def("locality(Tensor t, str group_name) -> Tensor");
  m.def("barrier_area(Tensor t, str group_name) -> Tensor");
}

TORCH_LIBRARY_IMPL(mori, CUDA, m) {
  m.impl("contiguous_view", mori_torch::ContiguousView);
  m.impl("locality", mori_torch::Locality);
  m.impl("barrier_area", mori_torch::BarrierArea);
}
