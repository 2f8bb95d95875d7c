// SPDX-License-Identifier: MIT
/* MORI Shmem: the OpenSHMEM-style API of the MORI Shmem Guide, in C, on
 * mori's symmetric heap. Names and flags are the guide's; calls return 0
 * or a negative MORI_E* code (mori/error.h) with the detail in
 * mori_last_error(), and objects come back through out-parameters — where
 * the guide's Python returns an address, the C call takes `void **out`.
 *
 * One process is one PE. The PEs of a job initialise together
 * (shmem_init_attr), allocate together (shmem_malloc: the same heap offset
 * on every PE) and free together (shmem_free). A PE whose arguments or
 * allocation sequence diverge makes the call fail on every PE, naming it.
 * Nothing waits forever: every collective step is bounded by
 * MORI_BOOTSTRAP_TIMEOUT_MS (60 s) and names the PEs that did not arrive.
 *
 * Calls other than shmem_get_unique_id, mori_shmem_use_plugins and
 * shmem_finalize return MORI_ENOT_INITIALIZED before shmem_init_attr.
 * Settings (environment): see docs/shmem.md. */
#ifndef MORI_SHMEM_H
#define MORI_SHMEM_H

#include "mori/comm.h"
#include "mori/device/address_map.h"
#include "mori/device/impl/shmem__types.h"
#include "mori/error.h"
#include "mori/window.h"

MORI_EXTERN_C_BEGIN

/* Flags of shmem_init_attr (the guide's values). */
enum {
  MORI_SHMEM_INIT_WITH_MPI_COMM = 0, /* arg: a pointer to an MPI_Comm (Open MPI) */
  MORI_SHMEM_INIT_WITH_UNIQUEID = 1, /* arg: a pointer to a mori_shmem_uniqueid_t */
};

enum { MORI_SHMEM_UNIQUEID_BYTES = 128 };

/* What rank 0 hands every PE (through a file, MPI, TCP, ...): where rank 0's
 * bootstrap listens and a random token of the job. Opaque bytes. */
typedef struct mori_shmem_uniqueid {
  uint8_t bytes[MORI_SHMEM_UNIQUEID_BYTES];
} mori_shmem_uniqueid_t;

/* Flags of shmem_ext_malloc_with_flags: the kind of memory the caller
 * needs. The heap holds one kind (MORI_SHMEM_HEAP_TYPE); asking for the
 * other fails with MORI_ENOTSUP rather than handing out the wrong kind. */
enum {
  MORI_SHMEM_MALLOC_DEFAULT = 0,       /* whatever the heap holds */
  MORI_SHMEM_MALLOC_UNCACHED = 1u << 0, /* fine-grained, uncached (MORI_SHMEM_HEAP_TYPE=uncached) */
  MORI_SHMEM_MALLOC_CACHED = 1u << 1,   /* normal, cached (MORI_SHMEM_HEAP_TYPE=normal) */
};

/* ---- before initialisation ---- */

/* The plug-ins the PEs' comm uses (mori/plugin.h): handle libraries and
 * transports the program links. Borrowed (the ops are static consts). Call
 * before shmem_init_attr; the list stays for later inits. The
 * //shmem:local_plugins library lists the single-node set for you
 * (mori/shmem_local_plugins.h). MORI_EBUSY while initialised. */
MORI_API int mori_shmem_use_plugins(const mori_handle_ops_t *const *handles, int num_handles,
                                    const mori_transport_ops_t *const *transports, int num_transports);
/* The same, with transports marked optional (bit i: transports[i] is
 * initialised only when some PE has a peer the others do not reach, as
 * mori_comm_attr_t.optional_transports says): p2p plus an optional rdma
 * opens no NIC in a one-node job and reaches every PE across nodes. */
MORI_API int mori_shmem_use_plugins_optional(const mori_handle_ops_t *const *handles, int num_handles,
                                             const mori_transport_ops_t *const *transports, int num_transports,
                                             uint32_t optional_transports);

/* Rank 0 (or whoever hands the ID out) makes one: it picks the bootstrap
 * address (MORI_SOCKET_IFNAME, else the first interface that is up and not
 * loopback), starts listening there and keeps the socket for the
 * shmem_init_attr of rank 0 in this process (a process of its own may hand
 * it out if it exits before rank 0 starts). */
MORI_API int shmem_get_unique_id(mori_shmem_uniqueid_t *out);
/* An ID received as bytes (a file, a socket): MORI_EINVAL when `len` is not
 * MORI_SHMEM_UNIQUEID_BYTES or the bytes are not an intact unique ID. */
MORI_API int mori_shmem_uniqueid_from_bytes(const void *bytes, size_t len, mori_shmem_uniqueid_t *out);

/* Collective over the npes PEs: starts the bootstrap, the comm and the
 * device state. Pins the calling thread to the CPUs near its GPU unless
 * MORI_IGNORE_CPU_AFFINITY is set. MORI_EEXIST when already initialised. A
 * unique ID of another job, or PEs that disagree on npes, fail with
 * MORI_EMISMATCH naming the PE and the sizes. */
MORI_API int shmem_init_attr(unsigned int flags, int rank, int npes, const void *arg);
/* Local and idempotent: releases what shmem holds (allocations, windows,
 * the comm, the bootstrap), never waits for peers (end with
 * shmem_barrier_all when peers may still be using this PE's memory).
 * shmem_init_attr works again afterwards. */
MORI_API int shmem_finalize(void);

/* ---- queries: the value, or a negative code before initialisation ---- */
MORI_API int shmem_mype(void);
MORI_API int shmem_npes(void);
/* RDMA queue pairs per peer (mori's RDMA transport opens one). */
MORI_API int shmem_num_qp_per_pe(void);

/* ---- memory ---- */

/* Collective: `size` bytes from the symmetric heap at the same offset on
 * every PE, not zeroed (size 0: *out = NULL everywhere). Alignment 4096. */
MORI_API int shmem_malloc(size_t size, void **out);
/* alignment: a power of two. */
MORI_API int shmem_malloc_align(size_t alignment, size_t size, void **out);
MORI_API int shmem_ext_malloc_with_flags(size_t size, unsigned int flags, void **out);
/* Collective: every PE frees the same allocation (NULL everywhere is a
 * no-op). A foreign or already-freed pointer, or PEs freeing different
 * allocations, fail on every PE (naming the PE) and nothing is freed. */
MORI_API int shmem_free(void *ptr);

/* Collective: makes existing device memory (mapped by the GPU runtime's
 * virtual-memory API, e.g. torch's expandable segments) addressable by the
 * PEs, as a window of its own; every PE registers a buffer of the same
 * mapping size. Local: deregister with the same pointer and size. */
MORI_API int shmem_buffer_register(void *ptr, size_t size);
/* This PE's part of the collective `call` ("shmem_malloc",
 * "shmem_malloc_align", "shmem_ext_malloc_with_flags", "shmem_free" or
 * "shmem_buffer_register") when a binding's own checks refused its
 * arguments (`why`: what was wrong): it takes the call's collective step
 * with a failure, so every PE's call fails at once naming this PE and
 * `why`, nothing is allocated or freed, and no PE is left paired with this
 * PE's next call. Returns that failure (MORI_EINVAL unless the step failed
 * otherwise). */
MORI_API int mori_shmem_refused(const char *call, const char *why);
MORI_API int shmem_buffer_deregister(void *ptr, size_t size);

/* Where this process reaches `ptr` (inside a shmem allocation or registered
 * buffer) on dest_pe by load/store; NULL when dest_pe is reached otherwise
 * (another node, MORI_DISABLE_P2P) or the pointer or PEs are not valid
 * (mori_last_error() says which). dest_pe == my_pe gives ptr back. */
MORI_API void *shmem_ptr_p2p(const void *ptr, int my_pe, int dest_pe);

/* The address map (mori/device/address_map.h) of the allocation holding
 * `ptr` (any pointer inside a live shmem allocation; for a registered
 * buffer, the mapping it was registered with): peer_bases is a device
 * table of npes entries (0 where a PE is not reached by load/store),
 * local_rank my PE, peer_bases[local_rank] == allocation_base. The table
 * is the allocation's own (made by shmem_malloc, no allocation here) and
 * stays valid until shmem_free. MORI_ENOT_OWNED for a pointer outside every
 * live allocation, saying so when it was freed. Local. */
MORI_API int mori_shmem_address_map(const void *ptr, mori_address_map_t *out);
/* `ptr` as seen on `pe`, with the reason when it cannot be: MORI_ENOT_OWNED
 * (not in a live allocation; freed ones named), MORI_EINVAL (pe out of
 * range), MORI_EUNREACHABLE (pe not reached by load/store). Local. */
MORI_API int mori_shmem_translate(const void *ptr, int pe, void **out);

/* Collective: returns when every PE has called it (host calls only: the
 * device's streams are not waited for). */
MORI_API int shmem_barrier_all(void);

/* ---- the device side (mori/device/shmem.h) ---- */

/* The state device code takes: by value as a kernel argument, or in a
 * module's global variable (below). */
MORI_API int mori_shmem_device_state(mori_shmem_device_state_t *out);
/* Copies the device state into the global variable "globalGpuStates"
 * (MORI_SHMEM_DEFINE_GLOBAL_STATE) of a loaded GPU module (a CUmodule or
 * hipModule_t, e.g. a Triton kernel's). MORI_ENOTSUP on the host platform. */
MORI_API int shmem_module_init(void *module_handle);
/* Reports (and clears) an error a device-side wait left (timeout, abort). */
MORI_API int mori_shmem_check(void);

/* ---- mori's objects under shmem ---- */

/* The comm of the PEs (teams, windows, collectives of mori's own API). */
MORI_API int mori_shmem_comm(mori_comm_t **out);
/* The window of the allocation or registered buffer holding `ptr` (the
 * device API of mori/device.h works on its view). */
MORI_API int mori_shmem_window(const void *ptr, mori_window_t **out);

MORI_EXTERN_C_END

#endif
