// SPDX-License-Identifier: MIT
/* What Debian's hsa-runtime headers (libhsa-runtime-dev 5.2.3) lack.
 *
 * hsa_amd_memory_async_copy_on_engine and hsa_amd_memory_copy_engine_status
 * arrived in ROCm 5.7; the runtimes mori runs on (MI300 and later) export
 * them, the headers mori builds against here do not declare them. They are
 * looked up with dlsym, so only their types are needed: declared here under
 * mori's own names, so newer headers that do declare them cannot clash.
 *
 * The engine argument is the runtime's hsa_amd_sdma_engine_id_t, an enum of
 * single bits (engine i is 1 << i); an enum with those values is passed like
 * a uint32_t. */
#ifndef MORI_CORE_PLATFORM_HSA_COMPAT_H
#define MORI_CORE_PLATFORM_HSA_COMPAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hsa/hsa.h>

/* Copies `size` bytes on the SDMA engine `engine_id` (one bit) of the agent
 * the runtime picks from the two agents; decrements `completion_signal` when
 * done. With `force_copy_on_sdma` the runtime does not swap in a blit kernel
 * for same-device copies. */
typedef hsa_status_t (*mori_hsa_async_copy_on_engine_fn)(void *dst, hsa_agent_t dst_agent, const void *src,
                                                         hsa_agent_t src_agent, size_t size, uint32_t num_dep_signals,
                                                         const hsa_signal_t *dep_signals,
                                                         hsa_signal_t completion_signal, uint32_t engine_id,
                                                         bool force_copy_on_sdma);

/* The SDMA engines free for copies from `src_agent` to `dst_agent`, as a
 * bitmask of engine ids. */
typedef hsa_status_t (*mori_hsa_copy_engine_status_fn)(hsa_agent_t dst_agent, hsa_agent_t src_agent,
                                                       uint32_t *engine_ids_mask);

/* ROCm 5.6 and later: a dma-buf fd for device memory [ptr, ptr + size)
 * (*offset: where ptr lies in it), and its close. */
typedef hsa_status_t (*mori_hsa_export_dmabuf_fn)(const void *ptr, size_t size, int *dmabuf, uint64_t *offset);
typedef hsa_status_t (*mori_hsa_close_dmabuf_fn)(int dmabuf);

#endif
