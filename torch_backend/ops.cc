// SPDX-License-Identifier: MIT
// torch.ops.mori.*: mori's fused collectives on torch tensors. Each is one
// kernel that synchronises inside (mori/collectives.h): when the op returns
// on the stream, the next kernel on that stream can read `out` on every rank,
// and the next call may run at once. Inputs and outputs are any CUDA tensors
// of the group's ranks (they need not be symmetric; an all-to-all into a
// symmetric out rendezvoused on the group writes straight into it). Registered with the
// dispatcher with Meta kernels, so they work under torch.compile and inside
// CUDA graphs (after one call outside the capture has sized the workspace).
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <string>

#include "mori/collectives.h"
#include "mori/runtime.h"
#include "torch_backend/build_info.h"
#include "torch_backend/allocator.h"
#include "torch_backend/device.h"

namespace mori_torch {
namespace {

void CheckPair(const at::Tensor &input, const at::Tensor &out, const char *op) {
  TORCH_CHECK(input.device().type() == kDeviceType && out.device() == input.device(), "MORI ", op,
              ": input and out must be on the same GPU (got ", input.device(), " and ", out.device(), ")");
  TORCH_CHECK(input.is_contiguous() && out.is_contiguous(), "MORI ", op, ": input and out must be contiguous");
  TORCH_CHECK(input.scalar_type() == out.scalar_type(), "MORI ", op, ": input is ", input.scalar_type(), ", out is ",
              out.scalar_type());
  TORCH_CHECK(input.numel() == out.numel(), "MORI ", op, ": input has ", input.numel(), " elements, out ", out.numel());
}

// The group's collective context on `device`, sized by `workspace(coll)`.
// What a kernel of an earlier call left in the mailbox goes to *pending:
// the op raises it after making its own call (RaisePending), not before,
// so that a rank which learns of an earlier failure still takes part in
// this call and the group's calls stay paired (a member that refused a
// call takes part in it and goes on; the others must go on with it).
template <typename Workspace>
mori_coll_t *Context(const std::string &group, int device, void *stream, const char *op, Workspace workspace,
                     std::string *pending) {
  Group &g = GroupFor(group, device);
  int capturing = 0;
  int rc = mori_stream_capturing(device, stream, &capturing);
  TORCH_CHECK(rc == 0, "MORI ", op, ": ", mori_last_error());
  mori_coll_t *coll = g.Coll(0, capturing);
  rc = mori_coll_check(coll);
  if (rc != 0) *pending = mori_last_error();
  mori_team_t team = mori_coll_team(coll);
  TORCH_CHECK(team.size == static_cast<int>(g.rank_to_global.size()), "MORI ", op, ": group '", group, "' has ",
              g.rank_to_global.size(), " ranks but only ", team.size,
              " of them are load/store reachable from this rank; the fused collectives need all of them");
  return g.Coll(workspace(coll), capturing);
}

// This rank's part of an op its own checks refused before the op reached
// mori (mori refuses for itself after that): the group's other ranks may
// have made theirs, and without this rank's part they would wait out their
// timeout, the group's later ops then out of step. mori_coll_refuse takes
// the call's epoch and moves nothing, so theirs ends at once naming this
// rank. Only where this rank has the group's context on the device already
// (making one is a collective step), outside graph capture (the part would
// be captured, not run), and for an op with something to move (an empty
// one takes no epoch on the others, unless the context checks calls:
// MORI_COLL_CHECK_CALLS). What the refusal itself meets is not raised: the
// op's own error is.
void RefuseHere(const std::string &group, const at::Tensor &input) {
  int device = input.device().type() == kDeviceType ? input.device().index() : CurrentDevice();
  Group *g = ExistingGroupFor(group, device);
  if (!g || !g->coll) return;
  if (input.numel() == 0 && !mori_coll_checks_calls(g->coll)) return;
  c10::DeviceGuard guard(GpuDevice(device));
  void *stream = CurrentStream(device);
  int capturing = 0;
  if (mori_stream_capturing(device, stream, &capturing) != 0 || capturing) return;
  (void)mori_coll_refuse(g->coll, stream);
}

// Runs an op; `reached` is set by the op just before its mori call. An
// error before that is this rank's own refusal (RefuseHere).
template <typename Op>
void RefusedHereOnError(const std::string &group, const at::Tensor &input, Op op) {
  bool reached = false;
  try {
    op(reached);
  } catch (const c10::Error &) {
    if (!reached) RefuseHere(group, input);
    throw;
  }
}

// After the op's own call: an earlier call's failure (see Context).
void RaisePending(const std::string &pending, const char *op) {
  TORCH_CHECK(pending.empty(), "MORI ", op, ": an earlier call on this group failed (this call was made): ", pending);
}

void AllToAll(const at::Tensor &input, at::Tensor &out, std::string group) {
  RefusedHereOnError(group, input, [&](bool &reached) {
    CheckPair(input, out, "all_to_all");
    int device = input.device().index();
    c10::DeviceGuard guard(input.device());
    void *stream = CurrentStream(device);
    size_t bytes = input.numel() * input.element_size();
    std::string pending;
    mori_coll_t *coll = Context(
        group, device, stream, "all_to_all",
        [&](mori_coll_t *c) {
          int n = mori_coll_team(c).size;
          TORCH_CHECK(input.numel() % n == 0, "MORI all_to_all: ", input.numel(),
                      " elements do not split evenly over ", n, " ranks");
          return mori_all_to_all_workspace(c, bytes / n);
        },
        &pending);
    size_t per_rank = bytes / mori_coll_team(coll).size;
    // A symmetric out (rendezvoused on this group): peers write straight
    // into it, with no staging and no second copy.
    size_t out_offset = 0;
    std::shared_ptr<WindowState> out_win = WindowOf(out.data_ptr(), group, device, &out_offset);
    reached = true;
    int rc = out_win && mori_window_comm(out_win->win()) == mori_coll_comm(coll)
                 ? mori_all_to_all_window(coll, input.data_ptr(), out_win->win(), out_offset, per_rank, stream)
                 : mori_all_to_all(coll, input.data_ptr(), out.data_ptr(), per_rank, stream);
    TORCH_CHECK(rc == 0, "MORI all_to_all of ", per_rank, " bytes per rank on group '", group,
                "': ", mori_last_error());
    RaisePending(pending, "all_to_all");
  });
}

mori_dtype_t DtypeOf(const at::Tensor &t, const char *op) {
  switch (t.scalar_type()) {
    case c10::ScalarType::Float: return MORI_FLOAT32;
    case c10::ScalarType::BFloat16: return MORI_BFLOAT16;
    case c10::ScalarType::Half: return MORI_FLOAT16;
    default: TORCH_CHECK(false, "MORI ", op, ": ", t.scalar_type(), " is not supported (float32, bfloat16, float16)");
  }
}

mori_redop_t OpOf(const std::string &name) {
  if (name == "sum") return MORI_REDOP_SUM;
  if (name == "avg") return MORI_REDOP_AVG;
  if (name == "max") return MORI_REDOP_MAX;
  if (name == "min") return MORI_REDOP_MIN;
  TORCH_CHECK(false, "MORI all_reduce: reduce_op '", name, "' is not one of sum, avg, max, min");
}

void AllReduce(const at::Tensor &input, at::Tensor &out, std::string reduce_op, std::string group) {
  RefusedHereOnError(group, input, [&](bool &reached) {
    CheckPair(input, out, "all_reduce");
    mori_dtype_t dtype = DtypeOf(input, "all_reduce");
    mori_redop_t op = OpOf(reduce_op);
    int device = input.device().index();
    c10::DeviceGuard guard(input.device());
    void *stream = CurrentStream(device);
    size_t count = input.numel();
    std::string pending;
    mori_coll_t *coll = Context(
        group, device, stream, "all_reduce", [&](mori_coll_t *c) { return mori_all_reduce_workspace(c, count, dtype); },
        &pending);
    reached = true;
    int rc = mori_all_reduce(coll, input.data_ptr(), out.data_ptr(), count, dtype, op, stream);
    TORCH_CHECK(rc == 0, "MORI all_reduce of ", count, " elements on group '", group, "': ", mori_last_error());
    RaisePending(pending, "all_reduce");
  });
}

// torch's all_to_all_vdev family: rows run along dim 0; `out` must be a MORI
// tensor rendezvoused on the group; splits are int64 on the GPU.
//   all_to_all_vdev         in_splits [n], out_splits_offsets [2, n]
//   all_to_all_vdev_2d      in_splits [n * E] (member-major), out [2, E * n]
//                           (expert-major), expert groups aligned to major_align
//   all_to_all_vdev_2d_offset  in_splits_offsets [2, E * n] (expert-major),
//                           out [2, n * E] (member-major)
enum class Vdev { kRanks, kExperts, kCombine };

void AllToAllVdevAny(Vdev kind, const at::Tensor &input, at::Tensor &out, const at::Tensor &in_splits,
                     at::Tensor &out_splits_offsets, const std::string &group, int64_t major_align) {
  RefusedHereOnError(group, input, [&](bool &reached) {
    const char *op = kind == Vdev::kRanks ? "all_to_all_vdev" : kind == Vdev::kExperts ? "all_to_all_vdev_2d"
                                                                                       : "all_to_all_vdev_2d_offset";
    TORCH_CHECK(input.device().type() == kDeviceType && out.device() == input.device() &&
                    in_splits.device() == input.device() && out_splits_offsets.device() == input.device(),
                "MORI ", op, ": every tensor must be on the same GPU");
    TORCH_CHECK(input.is_contiguous() && out.is_contiguous() && in_splits.is_contiguous() &&
                    out_splits_offsets.is_contiguous(),
                "MORI ", op, ": tensors must be contiguous");
    TORCH_CHECK(input.scalar_type() == out.scalar_type(), "MORI ", op, ": input is ", input.scalar_type(), ", out is ",
                out.scalar_type());
    TORCH_CHECK(in_splits.scalar_type() == c10::ScalarType::Long &&
                    out_splits_offsets.scalar_type() == c10::ScalarType::Long,
                "MORI ", op, ": splits must be int64");
    TORCH_CHECK(input.dim() >= 1 && out.dim() >= 1, "MORI ", op, ": input and out need a dim 0 (rows)");
    TORCH_CHECK(major_align >= 1, "MORI ", op, ": major_align must be at least 1 (got ", major_align, ")");
    size_t row_bytes = input.size(0) ? input.numel() / input.size(0) * input.element_size() : 0;
    size_t out_row_bytes = out.size(0) ? out.numel() / out.size(0) * out.element_size() : 0;
    TORCH_CHECK(row_bytes > 0 && row_bytes == out_row_bytes, "MORI ", op, ": rows of input (", row_bytes,
                " bytes) and out (", out_row_bytes, " bytes) must match and be non-empty");
    int device = input.device().index();
    c10::DeviceGuard guard(input.device());
    void *stream = CurrentStream(device);
    // Experts per rank, from the splits' sizes (the group's size is known once
    // the context is; the workspace grows with the experts).
    int64_t per = kind == Vdev::kCombine ? in_splits.numel() / 2 : in_splits.numel();
    std::string pending;
    mori_coll_t *coll = Context(
        group, device, stream, op,
        [&](mori_coll_t *c) {
          int n = mori_coll_team(c).size;
          TORCH_CHECK(per % n == 0 && per > 0, "MORI ", op, ": ", in_splits.numel(),
                      " split entries do not fit a group of ", n, " ranks");
          return mori_all_to_all_v_workspace(c, (uint32_t)(per / n));
        },
        &pending);
    int n = mori_coll_team(coll).size;
    int64_t experts = per / n;
    int64_t want_in = kind == Vdev::kCombine ? 2 * experts * n : experts * n;
    TORCH_CHECK(in_splits.numel() == want_in && out_splits_offsets.numel() == 2 * experts * n, "MORI ", op, ": group '",
                group, "' has ", n, " ranks and ", experts, " experts per rank: the splits need ", want_in,
                " entries (have ", in_splits.numel(), "), out_splits_offsets ", 2 * experts * n, " (has ",
                out_splits_offsets.numel(), ")");
    size_t out_offset = 0;
    std::shared_ptr<WindowState> out_win = WindowOf(out.data_ptr(), group, device, &out_offset);
    TORCH_CHECK(out_win && mori_window_comm(out_win->win()) == mori_coll_comm(coll), "MORI ", op, ": out must be a",
                " MORI tensor rendezvoused on group '", group, "' (symm_mem.empty + symm_mem.rendezvous)");
    const int64_t *splits = in_splits.data_ptr<int64_t>();
    int64_t *result = out_splits_offsets.data_ptr<int64_t>();
    reached = true;
    int rc = kind == Vdev::kRanks
                 ? mori_all_to_all_v(coll, input.data_ptr(), splits, out_win->win(), out_offset, out.size(0), row_bytes,
                                     result, stream)
             : kind == Vdev::kExperts
                 ? mori_all_to_all_v_experts(coll, input.data_ptr(), splits, (uint32_t)experts, (size_t)major_align,
                                             out_win->win(), out_offset, out.size(0), row_bytes, result, stream)
                 : mori_all_to_all_v_combine(coll, input.data_ptr(), splits, (uint32_t)experts, out_win->win(),
                                             out_offset, out.size(0), row_bytes, result, stream);
    TORCH_CHECK(rc == 0, "MORI ", op, " on group '", group, "': ", mori_last_error());
    RaisePending(pending, op);
  });
}

void AllToAllVdev(const at::Tensor &input, at::Tensor &out, const at::Tensor &in_splits, at::Tensor &out_splits_offsets,
                  std::string group) {
  AllToAllVdevAny(Vdev::kRanks, input, out, in_splits, out_splits_offsets, group, 1);
}

void AllToAllVdev2d(const at::Tensor &input, at::Tensor &out, const at::Tensor &in_splits, at::Tensor &out_splits_offsets,
                    std::string group, std::optional<int64_t> major_align) {
  AllToAllVdevAny(Vdev::kExperts, input, out, in_splits, out_splits_offsets, group, major_align.value_or(1));
}

void AllToAllVdev2dOffset(const at::Tensor &input, at::Tensor &out, const at::Tensor &in_splits_offsets,
                          at::Tensor &out_splits_offsets, std::string group) {
  AllToAllVdevAny(Vdev::kCombine, input, out, in_splits_offsets, out_splits_offsets, group, 1);
}

void AllToAllMeta(const at::Tensor &, at::Tensor &, std::string) {}
void AllToAllVdevMeta(const at::Tensor &, at::Tensor &, const at::Tensor &, at::Tensor &, std::string) {}
void AllToAllVdev2dMeta(const at::Tensor &, at::Tensor &, const at::Tensor &, at::Tensor &, std::string,
                        std::optional<int64_t>) {}
void AllReduceMeta(const at::Tensor &, at::Tensor &, std::string, std::string) {}

}  // namespace
}  // namespace mori_torch

namespace mori_torch {
// Also what the build info lists (build_info.h).
const char *const kOpSchemas[] = {
    "all_to_all(Tensor input, Tensor(a!) out, str group_name) -> ()",
    "all_reduce(Tensor input, Tensor(a!) out, str reduce_op, str group_name) -> ()",
    "all_to_all_vdev(Tensor input, Tensor(a!) out, Tensor in_splits, Tensor(a!) out_splits_offsets, str group_name) -> ()",
    "all_to_all_vdev_2d(Tensor input, Tensor(a!) out, Tensor in_splits, Tensor(a!) out_splits_offsets, "
    "str group_name, int? major_align=None) -> ()",
    "all_to_all_vdev_2d_offset(Tensor input, Tensor(a!) out, Tensor in_splits_offsets, "
    "Tensor(a!) out_splits_offsets, str group_name) -> ()",
};
const size_t kNumOps = sizeof(kOpSchemas) / sizeof(kOpSchemas[0]);
}  // namespace mori_torch

TORCH_LIBRARY(mori, m) {
  for (size_t i = 0; i < mori_torch::kNumOps; i++) m.def(mori_torch::kOpSchemas[i]);
}

TORCH_LIBRARY_IMPL(mori, CUDA, m) {
  m.impl("all_to_all", mori_torch::AllToAll);
  m.impl("all_reduce", mori_torch::AllReduce);
  m.impl("all_to_all_vdev", mori_torch::AllToAllVdev);
  m.impl("all_to_all_vdev_2d", mori_torch::AllToAllVdev2d);
  m.impl("all_to_all_vdev_2d_offset", mori_torch::AllToAllVdev2dOffset);
}

TORCH_LIBRARY_IMPL(mori, Meta, m) {
  m.impl("all_to_all", mori_torch::AllToAllMeta);
  m.impl("all_reduce", mori_torch::AllReduceMeta);
  m.impl("all_to_all_vdev", mori_torch::AllToAllVdevMeta);
  m.impl("all_to_all_vdev_2d", mori_torch::AllToAllVdev2dMeta);
  m.impl("all_to_all_vdev_2d_offset", mori_torch::AllToAllVdevMeta);
}
