// SPDX-License-Identifier: MIT
// Kernels the GPU tests and benchmarks launch, behind a C interface so the
// test code is plain C++ built by the host compiler.
#ifndef MORI_TESTS_GPU_KERNELS_H
#define MORI_TESTS_GPU_KERNELS_H

#include "mori/device/impl/window__types.h"

#ifdef __cplusplus
extern "C" {
#endif

// Picks device local_rank % count; returns the device or a negative code.
int gpu_select_device(int local_rank);
int gpu_device_count(void);
const char *gpu_last_error(void);
int gpu_synchronize(void);
// Every rank writes a pattern into slot `me` of every peer's window.
int gpu_exchange(mori_window_dev_t view, int via_table, uint64_t chunk, uint32_t salt, int blocks_per_peer);
// Mismatches between the local window and what every rank should have written.
long long gpu_count_mismatches(mori_window_dev_t view, uint64_t chunk, uint32_t salt);
// Rank `writer` fills its memory; everybody reads it back through the peer pointer.
int gpu_fill_local(mori_window_dev_t view, uint64_t bytes, uint32_t salt);
long long gpu_check_peer(mori_window_dev_t view, int peer, uint64_t bytes, uint32_t salt);
// put + signal to `peer`; wait for the peer's signal (with timeout); check.
int gpu_put_signal_round(mori_window_dev_t view, int peer, uint64_t bytes, uint64_t signal_offset, uint64_t round,
                         uint64_t timeout_ns, int *device_rc);
// A wait for a signal nobody sends: returns the kernel's code.
int gpu_wait_nobody(mori_window_dev_t view, uint64_t signal_offset, uint64_t timeout_ns, int *device_rc);
// One LSA barrier on `channel` by one block of `threads`: the kernel's code.
int gpu_barrier_once(mori_window_dev_t view, uint32_t channel, uint64_t timeout_ns, int threads, int *device_rc);
// Benchmarks (microseconds per iteration, CUDA events).
// pad_protocol: torch's CAS protocol on the signal pad, else the epoch barrier.
double gpu_bench_barrier(mori_window_dev_t view, int iters, int pad_protocol);
// Microseconds per put; reps puts run back to back inside each launch.
double gpu_bench_put(mori_window_dev_t view, int peer, void *src, uint64_t bytes, int blocks, int threads, int via_table,
                     int iters, int reps);
// A one-thread kernel on the default stream that spins for `ns`; whether
// the default stream still has work (1), is idle (0), or failed (-1).
int gpu_spin_start(uint64_t ns);
int gpu_spin_running(void);
// The same spin on a given stream, and whether that stream has work (1),
// is idle (0), or failed (-1).
int gpu_spin_on(void *stream, uint64_t ns);
int gpu_stream_busy(void *stream);
// ---- through the proxy ring (peers outside the LSA team: rdma) ----
// The window: [send: blocks x 2 x slot][recv: blocks x 2 x slot][signals:
// blocks x 8][counter: 8]. Each block, per round, fills a send slot, puts it
// into the peer's recv slot, sets its signal (fenced after the put) and adds
// 1 to the peer's counter; then waits for the peer's signal of that round
// and checks every word it received. Two slots per block: the peer's next
// write to a slot comes only after it has seen this rank's round, i.e. after
// this rank checked it. Ends with mori_quiet_window. *device_rc: first
// failing device code; *mismatches: words that differed. Waits for the
// kernel by event (see gpu_proxy_test.cc).
int gpu_proxy_exchange(mori_window_dev_t view, int peer, uint64_t slot, int blocks, int rounds, uint64_t timeout_ns,
                       int *device_rc, unsigned long long *mismatches);
// mori_get_block of `bytes` from the peer's window at src_offset into this
// window at dst_offset, then mori_quiet_window.
int gpu_proxy_get(mori_window_dev_t view, int peer, uint64_t dst_offset, uint64_t src_offset, uint64_t bytes, int *device_rc);
// One block of `threads` threads posts `batches` batches per warp with
// mori_gda_put_warp (GPU posting only): thread l of batch b puts
// gpu_gda_warp_batch_bytes(l, b) bytes from this window's slot l into the
// peer's slot (b % GPU_GDA_WARP_BATCH_SETS) * threads + l after `recv`;
// then mori_gda_quiet. `threads` not a multiple of the warp size: the last
// warp is short.
#define GPU_GDA_WARP_BATCH_SETS 4
MORI_HOST_DEVICE uint64_t gpu_gda_warp_batch_bytes(int lane, int batch) { return 16 + 16 * (uint64_t)((lane + 3 * batch) % 8); }
int gpu_gda_warp_batches(mori_window_dev_t view, int peer, uint64_t slot, uint64_t recv, int batches, int threads,
                         int *device_rc);
// Ring benchmarks, CUDA events around `iters` launches (microseconds per
// request). Throughput: one block of `threads` threads, each submitting
// `per_thread` puts of `bytes` (distinct offsets) then one quiet per launch.
// Latency: one thread, per iteration a put of `bytes` + a signal set, then a
// quiet (the completion of both seen by the kernel).
double gpu_bench_proxy_throughput(mori_window_dev_t view, int peer, uint64_t bytes, int threads, int per_thread, int iters,
                                  int *device_rc);
double gpu_bench_proxy_latency(mori_window_dev_t view, int peer, uint64_t bytes, uint64_t signal_offset, int per_launch,
                               int iters, int *device_rc);
// A kernel on a fresh non-blocking stream copies the n entries of a device
// pointer table; returns 0 with them in out[] (host memory).
int gpu_read_table(void *const *table_dev, int n, void **out);
// Graph capture in global mode (torch's default) on a fresh non-blocking
// stream (NULL on failure); a table read queued on it into device memory
// `dev_out`; the capture ended, replayed once and waited for, the stream
// and graph freed.
void *gpu_capture_begin(void);
int gpu_read_table_async(void *const *table_dev, int n, void **dev_out, void *stream);
int gpu_capture_end_replay(void *stream);
int gpu_copy_out(void *host, const void *dev, uint64_t bytes);
// Copies to device memory and waits until the bytes have landed (kernels on
// any stream queued afterwards see them).
int gpu_copy_in(void *dev, const void *host, uint64_t bytes);
// Zeroes device memory and waits (mori memory is not zeroed when allocated).
int gpu_zero(void *p, uint64_t bytes);
void *gpu_alloc(uint64_t bytes);
void gpu_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
