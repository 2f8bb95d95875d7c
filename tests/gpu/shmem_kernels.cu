// SPDX-License-Identifier: MIT
// Kernels of the shmem GPU test, written once for CUDA and HIP.
#include "tests/gpu/shmem_kernels.h"

#include <dlfcn.h>
#include <stdio.h>

#include <string>

#include "mori/device/shmem.h"

#if defined(MORI_DEVICE_COMPILER_HIP)
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemset hipMemset
#define gpuMemcpy hipMemcpy
#define gpuMemcpyDefault hipMemcpyDefault
#else
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemset cudaMemset
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyDefault cudaMemcpyDefault
#endif

static char last_error[256];
const char *gpu_shmem_last_error(void) { return last_error; }

static int check(gpuError_t e, const char *what) {
  if (e == gpuSuccess) return 0;
  snprintf(last_error, sizeof(last_error), "%s: %s", what, gpuGetErrorString(e));
  return -1;
}
#define GPU_TRY(call)                      \
  do {                                     \
    if (check((call), #call)) return -1;   \
  } while (0)

static __host__ __device__ uint64_t pattern(int writer, int reader, uint64_t i, uint64_t round) {
  return ((uint64_t)writer << 48) ^ ((uint64_t)reader << 32) ^ (i * 2654435761ull) ^ (round << 20);
}

uint64_t gpu_shmem_pattern(int writer, int reader, uint64_t i, uint64_t round) { return pattern(writer, reader, i, round); }

__global__ void ring_kernel(mori_shmem_device_state_t st, uint64_t *data, uint64_t words, uint64_t *sig, uint64_t round,
                            uint64_t timeout_ns, uint64_t *scratch, int *rc_out) {
  int me = shmem_dev_mype(st), n = shmem_dev_npes(st), next = (me + 1) % n;
  for (uint64_t i = threadIdx.x; i < words; i += blockDim.x) scratch[i] = pattern(me, next, i, round);
  __syncthreads();
  int rc = shmem_dev_putmem_block(st, data + (uint64_t)me * words, scratch, words * sizeof(uint64_t), next);
  if (threadIdx.x == 0) {
    shmem_dev_quiet();
    if (!rc) rc = shmem_dev_signal_add(st, sig, 1, next);
    if (!rc) rc = shmem_dev_signal_wait_until(st, sig, MORI_CMP_GE, round, timeout_ns, 0);
  }
  __syncthreads();
  int barrier = shmem_dev_barrier_all_block(st, timeout_ns);
  if (threadIdx.x == 0) *rc_out = rc ? rc : barrier;
}

int gpu_shmem_ring(mori_shmem_device_state_t st, uint64_t *data, uint64_t words, uint64_t *sig, uint64_t round,
                   uint64_t timeout_ns, int *device_rc) {
  uint64_t *scratch = 0;
  int *rc = 0;
  GPU_TRY(gpuMalloc((void **)&scratch, words * sizeof(uint64_t)));
  GPU_TRY(gpuMalloc((void **)&rc, sizeof(int)));
  ring_kernel<<<1, 256>>>(st, data, words, sig, round, timeout_ns, scratch, rc);
  GPU_TRY(gpuGetLastError());
  GPU_TRY(gpuDeviceSynchronize());
  GPU_TRY(gpuMemcpy(device_rc, rc, sizeof(int), gpuMemcpyDefault));
  (void)gpuFree(scratch);
  (void)gpuFree(rc);
  return 0;
}

__global__ void ptr_kernel(mori_shmem_device_state_t st, const void *ptr, int pe, void **out) { *out = shmem_dev_ptr_p2p(st, ptr, pe); }

int gpu_shmem_ptr_p2p(mori_shmem_device_state_t st, const void *ptr, int pe, void **out) {
  void **d = 0;
  GPU_TRY(gpuMalloc((void **)&d, sizeof(void *)));
  ptr_kernel<<<1, 1>>>(st, ptr, pe, d);
  GPU_TRY(gpuGetLastError());
  GPU_TRY(gpuMemcpy(out, d, sizeof(void *), gpuMemcpyDefault));
  (void)gpuFree(d);
  return 0;
}

int gpu_shmem_copy_to_host(void *dst, const void *src, uint64_t bytes) {
  GPU_TRY(gpuMemcpy(dst, src, bytes, gpuMemcpyDefault));
  return 0;
}

int gpu_shmem_zero(void *p, uint64_t bytes) {
  GPU_TRY(gpuMemset(p, 0, bytes));
  GPU_TRY(gpuDeviceSynchronize());
  return 0;
}

#if defined(MORI_DEVICE_COMPILER_CUDA)
/* What a Triton kernel's module looks like to shmem_module_init: a global
 * named globalGpuStates of the state's size (filled in from the header's
 * layout at STATE_BYTES, so the module follows it), and code that reads it. */
static const char module_ptx_format[] =
    ".version 7.8\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .global .align 8 .b8 globalGpuStates[STATE_BYTES];\n"
    ".visible .entry mori_read_state(.param .u64 out)\n"
    "{\n"
    "  .reg .b32 %r<3>;\n"
    "  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [out];\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  mov.u64 %rd3, globalGpuStates;\n"
    "  ld.global.u32 %r1, [%rd3+8];\n"
    "  ld.global.u32 %r2, [%rd3+12];\n"
    "  ld.global.u64 %rd4, [%rd3+16];\n"
    "  st.global.u32 [%rd2], %r1;\n"
    "  st.global.u32 [%rd2+4], %r2;\n"
    "  st.global.u64 [%rd2+8], %rd4;\n"
    "  ret;\n"
    "}\n";

/* The driver API, loaded as a Triton program would have it. */
static struct {
  int (*load)(void **module, const void *image);
  int (*get_function)(void **fn, void *module, const char *name);
  int (*launch)(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                void *stream, void **params, void **extra);
  int (*unload)(void *module);
} drv;

static int driver(void) {
  if (drv.load) return 0;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    snprintf(last_error, sizeof(last_error), "libcuda.so.1: %s", dlerror());
    return -1;
  }
  drv.load = (int (*)(void **, const void *))dlsym(lib, "cuModuleLoadData");
  drv.get_function = (int (*)(void **, void *, const char *))dlsym(lib, "cuModuleGetFunction");
  drv.launch = (int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **))dlsym(lib, "cuLaunchKernel");
  drv.unload = (int (*)(void *))dlsym(lib, "cuModuleUnload");
  return drv.load && drv.get_function && drv.launch && drv.unload ? 0 : -1;
}

int gpu_shmem_module_load(void **module) {
  if (driver()) return -1;
  (void)cudaFree(0); /* the primary context is current */
  std::string module_ptx = module_ptx_format;
  module_ptx.replace(module_ptx.find("STATE_BYTES"), 11, std::to_string(sizeof(mori_shmem_device_state_t)));
  int r = drv.load(module, module_ptx.c_str());
  if (r) snprintf(last_error, sizeof(last_error), "cuModuleLoadData: CUresult %d", r);
  return r ? -1 : 0;
}

int gpu_shmem_module_read(void *module, int *mype, int *npes, uint64_t *heap_base) {
  void *fn = 0;
  struct {
    int32_t mype, npes;
    uint64_t heap_base;
  } host, *dev = 0;
  if (drv.get_function(&fn, module, "mori_read_state")) return -1;
  GPU_TRY(gpuMalloc((void **)&dev, sizeof(host)));
  void *params[] = {&dev};
  int r = drv.launch(fn, 1, 1, 1, 1, 1, 1, 0, 0, params, 0);
  if (r) {
    snprintf(last_error, sizeof(last_error), "cuLaunchKernel: CUresult %d", r);
    return -1;
  }
  GPU_TRY(gpuDeviceSynchronize());
  GPU_TRY(gpuMemcpy(&host, dev, sizeof(host), gpuMemcpyDefault));
  (void)gpuFree(dev);
  *mype = host.mype;
  *npes = host.npes;
  *heap_base = host.heap_base;
  return 0;
}

int gpu_shmem_module_unload(void *module) { return module && driver() == 0 ? drv.unload(module) : 0; }
#else
int gpu_shmem_module_load(void **module) {
  *module = 0;
  snprintf(last_error, sizeof(last_error), "no PTX loader for HIP in this test");
  return -95;
}
int gpu_shmem_module_read(void *module, int *mype, int *npes, uint64_t *heap_base) { return -95; }
int gpu_shmem_module_unload(void *module) { return 0; }
#endif
