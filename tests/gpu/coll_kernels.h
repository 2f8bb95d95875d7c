// SPDX-License-Identifier: MIT
// Kernels that feed and check the collectives on GPUs: inputs that differ
// per rank and per iteration, and checks against a reference computed on the
// device, counted into a device counter so that thousands of iterations run
// back to back with no host synchronisation.
#ifndef MORI_TESTS_GPU_COLL_KERNELS_H
#define MORI_TESTS_GPU_COLL_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// in[dst * bytes + i] for every member dst: a pattern of (me, dst, i, iter).
int coll_fill_a2a(void *in, uint64_t bytes, int me, int n, uint64_t iter, void *stream);
// Adds to *mismatches the bytes of out that differ from what every member
// src sent (out[src * bytes + i] = pattern(src, me, i, iter)).
int coll_check_a2a(const void *out, uint64_t bytes, int me, int n, uint64_t iter, unsigned long long *mismatches,
                   void *stream);
// in[i] = value(me, i, iter) in dtype (mori_dtype_t).
int coll_fill_values(void *in, uint64_t count, int dtype, int me, uint64_t iter, void *stream);
// Adds to *mismatches the elements of out that differ, bit for bit, from
// the reduction of value(r, i, iter) over r in rank order (fp32, one rounding).
int coll_check_reduce(const void *out, uint64_t count, int dtype, int op, int n, uint64_t iter,
                      unsigned long long *mismatches, void *stream);
// Spins for about `ns` nanoseconds on the stream (a rank running late).
int coll_delay(uint64_t ns, void *stream);
// A device counter: zeroed, then read after the stream is done.
unsigned long long *coll_counter_new(void);
unsigned long long coll_counter_read(unsigned long long *counter, void *stream);
void coll_counter_free(unsigned long long *counter);
// A stream of its own (non-blocking), and CUDA/HIP graphs captured on it.
void *coll_stream_new(void);
void coll_stream_free(void *stream);
int coll_capture_begin(void *stream);
// Ends the capture; *graph receives an instantiated graph.
int coll_capture_end(void *stream, void **graph);
int coll_graph_replay(void *graph, void *stream);
// Microseconds for `replays` back-to-back replays, timed with events.
double coll_time_replays(void *graph, void *stream, int replays);
void coll_graph_free(void *graph);
int coll_stream_sync(void *stream);

#ifdef __cplusplus
}
#endif

#endif
