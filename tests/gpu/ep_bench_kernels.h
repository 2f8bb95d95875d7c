// SPDX-License-Identifier: MIT
// What bench_ep times besides mori's calls: the device-to-device copy it
// compares against, and events around a run of eager launches.
#ifndef MORI_TESTS_GPU_EP_BENCH_KERNELS_H
#define MORI_TESTS_GPU_EP_BENCH_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Queues a device-to-device copy of `bytes` on the stream.
int ep_bench_copy(void *dst, const void *src, uint64_t bytes, void *stream);
void *ep_bench_event_new(void);
int ep_bench_event_record(void *event, void *stream);
// Milliseconds from a to b, once b has happened.
double ep_bench_event_ms(void *a, void *b);
void ep_bench_event_free(void *event);
// The current device's architecture as the launch table names it
// ("sm_90", "gfx942").
int ep_bench_arch(char *arch, int size);

#ifdef __cplusplus
}
#endif

#endif
