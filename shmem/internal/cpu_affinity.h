// SPDX-License-Identifier: MIT
/* CPU affinity of the init thread (cpu_affinity.c), computed from sysfs:
 * the CPUs local to the GPU (its PCI device's local_cpulist), intersected
 * with the CPUs the thread may use now, grouped into physical cores by
 * thread_siblings_list; when the process sees several GPUs on that NUMA
 * node and there is a core per GPU, each GPU gets its own disjoint slice of
 * whole cores (SMT siblings stay together), in PCI-address order; otherwise
 * the whole node. */
#ifndef MORI_SHMEM_INTERNAL_CPU_AFFINITY_H
#define MORI_SHMEM_INTERNAL_CPU_AFFINITY_H

#include <sched.h>
#include <stdbool.h>

#include "mori/error.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_cpu_affinity_input {
  const char *sysfs_root;       /* "/sys", or a tree of the same shape */
  const char *const *gpu_pci;   /* every GPU the process sees (sysfs spelling) */
  int num_gpus;
  int gpu;                      /* this rank's GPU: an index into gpu_pci */
  const cpu_set_t *allowed;     /* the CPUs the thread may run on now */
  bool split;                   /* false: MORI_CPU_AFFINITY_NO_SPLIT (the whole node) */
} mori_cpu_affinity_input_t;

/* Pure: reads only under sysfs_root. *out gets the CPUs to bind; `why`
 * (may be NULL) a one-line account ("GPU 0000:1a:00.0, NUMA node 0, 4 GPUs
 * there: slice 1 of 4, cores 2-3 of 8: CPUs 2-3,18-19"). MORI_ENOENT names
 * a missing sysfs file; MORI_EINVAL when no local CPU is allowed. */
int mori_cpu_affinity_compute(const mori_cpu_affinity_input_t *in, cpu_set_t *out, char *why, size_t why_len);

/* "0-3,8,10-11" (as sysfs writes CPU lists). */
void mori_cpu_list_format(const cpu_set_t *set, char *out, size_t len);
/* Parses a sysfs CPU list; MORI_EINVAL on malformed text. */
int mori_cpu_list_parse(const char *text, cpu_set_t *out);

/* What shmem_init_attr does: unless MORI_IGNORE_CPU_AFFINITY is set, pins
 * the calling thread to the slice of `device` (MORI_CPU_AFFINITY_NO_SPLIT:
 * the whole node). Never fails the init: where topology is not known (the
 * host platform, a missing sysfs file) it says why and leaves the thread
 * alone. Returns whether it pinned. */
bool mori_cpu_affinity_bind_thread(int device);

MORI_EXTERN_C_END

#endif
