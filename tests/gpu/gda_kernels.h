// SPDX-License-Identifier: MIT
// Kernels of bench_gda: the device-side cost of GPU-initiated posting
// (mori/device/gda.h) beside the proxy's submit, timed inside the kernel.
#ifndef MORI_TESTS_GPU_GDA_KERNELS_H
#define MORI_TESTS_GPU_GDA_KERNELS_H

#include <stdint.h>

#include "mori/device/window.h"

#ifdef __cplusplus
extern "C" {
#endif

// What one launch measured, in nanoseconds of the device clock.
typedef struct gda_bench_result {
  double post_ns;  // per put (claim + WQE + doorbell), the posting thread's view
  double quiet_ns; // the final quiet (completion of everything posted)
  int device_rc;   // the first non-zero code a call returned, else 0
  // gda_bench_stages only: the mean time of each step of one put, in ns
  // (clock cycles scaled by the device clock's rate over the run).
  double stage_ns[8];
} gda_bench_result_t;

// Steps of one put that gda_bench_stages times apart, in order.
enum gda_bench_stage {
  GDA_STAGE_RESERVE = 0, // claim the WQE slot (device-memory atomics)
  GDA_STAGE_WQE,         // write the WQE (the ring's memory)
  GDA_STAGE_DBREC,       // order the WQE, then write the doorbell record
  GDA_STAGE_DOORBELL,    // order the record, then write the doorbell register
  GDA_STAGE_AFTER,       // what the ring does after the doorbell (a fence, in the fenced form)
  GDA_STAGE_RUNG,        // wait for earlier claims, release `rung`
  GDA_STAGE_COUNT
};

// Forms of one put that gda_bench_stages times: the library's steps (GPU-
// scope claim and `rung`, the QP read before the claim, release stores on
// the doorbell), the library's earlier form (system-scope claim and `rung`,
// the QP read after the claim), and the first one (a full system fence
// before the record, before the register and after it).
enum gda_stage_mode { GDA_MODE_LIBRARY = 0, GDA_MODE_SYSTEM_SCOPE = 1, GDA_MODE_FENCED = 2, GDA_MODE_COUNT };

// Where a doorbell's time goes by where the queue lives (gda_bench_ordering):
// one thread writes a 64-byte WQE, the doorbell record, the doorbell
// register (pinned host memory, standing for the NIC's register) and
// passes `rung` on, each store ordered as the name says; stage_ns[0..3]:
// WQE, record, register, rung.
enum gda_ordering {
  GDA_ORDER_HOST_QUEUE = 0,    // ring + record in host memory, both releases system-scope (the software ConnectX today)
  GDA_ORDER_DEV_SYS_SYS,       // ring + record in device memory, both releases system-scope
  GDA_ORDER_DEV_GPU_SYS,       // device memory; the record's release GPU-scope, the register's system-scope
  GDA_ORDER_DEV_GPU_GPU,       // device memory; both GPU-scope
  GDA_ORDER_DEV_GPU_NONE,      // device memory; the record GPU-scope, the register a plain store
  GDA_ORDERING_COUNT
};

// Forms of a send-queue slot claim (gda_bench_claim): the library's (the
// QP's failure flag read, then the counters, then a compare-and-swap), the
// same with the three loads in flight together, and a fetch-and-add.
enum gda_claim_form { GDA_CLAIM_CHECK_THEN_LOAD = 0, GDA_CLAIM_LOADS_TOGETHER, GDA_CLAIM_FETCH_ADD, GDA_CLAIM_FORM_COUNT };

// Selects GPU local_rank % device count (ranks share GPUs when there are
// fewer); -1 with a message on stderr when there is none.
int gda_select_device(int local_rank);

// One thread posts `iters` puts of `bytes` from the local window's start to
// `peer`, each with its own doorbell, then quiets.
int gda_bench_put(mori_window_dev_t view, int peer, uint64_t bytes, int iters, gda_bench_result_t *out);
// One warp posts `iters` batches of warp-size puts, one doorbell each;
// post_ns is per put (the batch's time / its size).
int gda_bench_put_warp(mori_window_dev_t view, int peer, uint64_t bytes, int iters, gda_bench_result_t *out);
// The same with the WQEs stored another way (enum mori_gda_warp_stores):
// each lane its own WQE in four 16-byte pieces, or the warp's WQEs in
// contiguous 512-byte runs of pieces.
int gda_bench_put_warp_pieces(mori_window_dev_t view, int peer, uint64_t bytes, int iters, gda_bench_result_t *out);
int gda_bench_put_warp_runs(mori_window_dev_t view, int peer, uint64_t bytes, int iters, gda_bench_result_t *out);
// One thread posts `iters` puts as gda_bench_put does, timing each step
// (enum gda_bench_stage) apart with the cycle counter, in the form `mode`
// (enum gda_stage_mode).
int gda_bench_stages(mori_window_dev_t view, int peer, uint64_t bytes, int iters, int mode, gda_bench_result_t *out);
// One thread, `iters` rounds of the ordering `pattern` (enum gda_ordering)
// on buffers of its own; no comm.
int gda_bench_ordering(int pattern, int iters, gda_bench_result_t *out);
// One thread, `iters` claims of one slot each in the form `form`; post_ns
// per claim.
int gda_bench_claim(int form, int iters, gda_bench_result_t *out);
// One thread submits `iters` puts to the proxy ring (no wait for the
// proxy), then quiets: the proxy's device-side cost beside GPU posting.
int gda_bench_proxy_submit(mori_window_dev_t view, int peer, uint64_t bytes, int iters, gda_bench_result_t *out);

#ifdef __cplusplus
}
#endif

#endif
