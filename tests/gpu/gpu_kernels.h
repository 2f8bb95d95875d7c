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
// Zeroes device memory and waits (mori memory is not zeroed when allocated).
int gpu_zero(void *p, uint64_t bytes);
void *gpu_alloc(uint64_t bytes);
void gpu_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
