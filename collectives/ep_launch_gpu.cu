// SPDX-License-Identifier: MIT
// The GPU launcher of MoE dispatch/combine: one kernel per call (or per
// half), every block resident at once (the receive half waits for the flag
// the send half's last block raises), on the caller's stream and the
// context's device.
#include <stdio.h>
#include <string.h>

#include "collectives/ep_internal.h"
#include "core/base/error.h"
#include "mori/device.h"
#include "mori/device/ep/dispatch_combine.h"

#if defined(MORI_DEVICE_COMPILER_HIP)
#define gpu(name) hip##name
typedef hipStream_t stream_t;
typedef hipError_t status_t;
typedef hipDeviceProp_t props_t;
#define GPU_SUCCESS hipSuccess
#define GPU_ATTR_SMS hipDeviceAttributeMultiprocessorCount
#define GPU_ATTR_WARP hipDeviceAttributeWarpSize
#else
#define gpu(name) cuda##name
typedef cudaStream_t stream_t;
typedef cudaError_t status_t;
typedef cudaDeviceProp props_t;
#define GPU_SUCCESS cudaSuccess
#define GPU_ATTR_SMS cudaDevAttrMultiProcessorCount
#define GPU_ATTR_WARP cudaDevAttrWarpSize
#endif

namespace {

// Threads per block at most: 512 on CUDA (16 warps; leaves 128 registers a
// thread for the combine's unrolled sums), 1024 on HIP (16 wavefronts).
// The second bound (one block per multiprocessor at that width) lets the
// compiler use those registers: bounded to two blocks, both kernels spilled
// (the combine's sums to local memory in its inner loop).
#if defined(MORI_DEVICE_COMPILER_HIP)
constexpr int kMaxThreads = MORI_EP_MAX_THREADS;
#else
constexpr int kMaxThreads = 512;
#endif

// The context and the arguments stay in the parameter space and are read
// through pointers there (a by-value struct whose address is taken would
// be copied into every thread's local memory).
#if defined(MORI_DEVICE_COMPILER_HIP)
#define MORI_EP_PARAM const
#else
#define MORI_EP_PARAM const __grid_constant__
#endif

__global__ void __launch_bounds__(kMaxThreads, 1) ep_dispatch_kernel(MORI_EP_PARAM mori_ep_dev_t e, MORI_EP_PARAM mori_ep_args_t a) {
  mori_ep_dispatch_grid(&e, &a, blockIdx.x, gridDim.x);
}

__global__ void __launch_bounds__(kMaxThreads, 1) ep_combine_kernel(MORI_EP_PARAM mori_ep_dev_t e, MORI_EP_PARAM mori_ep_args_t a) {
  mori_ep_combine_grid(&e, &a, blockIdx.x, gridDim.x);
}

int fail(status_t e, const char *what) { return mori_error_set(MORI_ERUNTIME, "ep: %s: %s", what, gpu(GetErrorString)(e)); }

// Switches to `device` for the scope, and back.
struct DeviceScope {
  int saved = -1;
  status_t status = GPU_SUCCESS;
  explicit DeviceScope(int device) {
    status = gpu(GetDevice)(&saved);
    if (status == GPU_SUCCESS && saved != device) status = gpu(SetDevice)(device);
  }
  ~DeviceScope() {
    int now = -1;
    if (saved >= 0 && gpu(GetDevice)(&now) == GPU_SUCCESS && now != saved) (void)gpu(SetDevice)(saved);
  }
};

// Per device and warps per block: the blocks both kernels keep resident,
// and the warp size (queried once; launches stay cheap on the host).
constexpr int kDevices = 64, kWarpSlots = 33;
int resident_cache[kDevices][kWarpSlots];
int warp_cache[kDevices];

int warp_size(int device, int *out) {
  if (device >= 0 && device < kDevices && warp_cache[device] > 0) return *out = warp_cache[device], 0;
  int ws = 0;
  status_t e = gpu(DeviceGetAttribute)(&ws, GPU_ATTR_WARP, device);
  if (e != GPU_SUCCESS) return fail(e, "querying the warp size");
  if (device >= 0 && device < kDevices) warp_cache[device] = ws;
  return *out = ws, 0;
}

int resident_blocks(int device, int threads, int ws, int *out) {
  int slot = threads / ws;
  if (device >= 0 && device < kDevices && slot < kWarpSlots && resident_cache[device][slot] > 0)
    return *out = resident_cache[device][slot], 0;
  int sms = 0, d = 0, c = 0;
  status_t e = gpu(DeviceGetAttribute)(&sms, GPU_ATTR_SMS, device);
  if (e == GPU_SUCCESS) e = gpu(OccupancyMaxActiveBlocksPerMultiprocessor)(&d, ep_dispatch_kernel, threads, 0);
  if (e == GPU_SUCCESS) e = gpu(OccupancyMaxActiveBlocksPerMultiprocessor)(&c, ep_combine_kernel, threads, 0);
  if (e != GPU_SUCCESS) return fail(e, "querying the resident blocks");
  int per_sm = d < c ? d : c;
  int blocks = sms * (per_sm > 0 ? per_sm : 1);
  if (blocks > MORI_EP_MAX_GRID) blocks = MORI_EP_MAX_GRID;
  if (device >= 0 && device < kDevices && slot < kWarpSlots) resident_cache[device][slot] = blocks;
  return *out = blocks, 0;
}

template <typename Kernel>
int launch(const mori_ep_t *ep, Kernel kernel, const mori_ep_args_t *a, mori_ep_shape_t shape, void *stream) {
  DeviceScope scope(ep->device);
  if (scope.status != GPU_SUCCESS) return fail(scope.status, "selecting the context's device");
  int ws = 32, resident = 1;
  int rc = warp_size(ep->device, &ws);
  if (rc) return rc;
  int warps = shape.warps > 0 ? (int)shape.warps : 16;
  if (warps * ws > kMaxThreads) warps = kMaxThreads / ws;
  int threads = warps * ws;
  if ((rc = resident_blocks(ep->device, threads, ws, &resident)) != 0) return rc;
  int blocks = shape.blocks > 0 && (int)shape.blocks < resident ? (int)shape.blocks : resident;
  kernel<<<blocks, threads, 0, (stream_t)stream>>>(ep->view, *a);
  status_t e = gpu(GetLastError)();
  return e == GPU_SUCCESS ? 0 : fail(e, "launching the kernel");
}

}  // namespace

extern "C" int mori_ep_launch_dispatch(const mori_ep_t *ep, const mori_ep_args_t *a, mori_ep_shape_t shape, void *stream) {
  return launch(ep, ep_dispatch_kernel, a, shape, stream);
}

extern "C" int mori_ep_launch_combine(const mori_ep_t *ep, const mori_ep_args_t *a, mori_ep_shape_t shape, void *stream) {
  return launch(ep, ep_combine_kernel, a, shape, stream);
}

extern "C" int mori_ep_launch_prepare(const mori_ep_t *ep) {
  DeviceScope scope(ep->device);
  if (scope.status != GPU_SUCCESS) return fail(scope.status, "selecting the context's device");
  gpu(FuncAttributes) attr;
  status_t e = gpu(FuncGetAttributes)(&attr, reinterpret_cast<const void *>(ep_dispatch_kernel));
  if (e == GPU_SUCCESS) e = gpu(FuncGetAttributes)(&attr, reinterpret_cast<const void *>(ep_combine_kernel));
  if (e != GPU_SUCCESS) return fail(e, "loading the kernels");
  int ws = 32, blocks = 0;
  int rc = warp_size(ep->device, &ws);
  int warps = 16 * ws > kMaxThreads ? kMaxThreads / ws : 16; /* the default shape */
  return rc ? rc : resident_blocks(ep->device, warps * ws, ws, &blocks);
}

extern "C" int mori_ep_device_wait(int device) {
  DeviceScope scope(device);
  if (scope.status != GPU_SUCCESS) return fail(scope.status, "selecting the context's device");
  status_t e = gpu(DeviceSynchronize)();
  return e == GPU_SUCCESS ? 0 : fail(e, "waiting for the device");
}

extern "C" int mori_ep_launch_reset(const mori_ep_t *ep, void *stream) {
  DeviceScope scope(ep->device);
  if (scope.status != GPU_SUCCESS) return fail(scope.status, "selecting the context's device");
  void *p = (char *)ep->memory + ep->view.off_recv_num;
  status_t e = gpu(MemsetAsync)(p, 0, sizeof(int32_t), (stream_t)stream);
  return e == GPU_SUCCESS ? 0 : fail(e, "clearing recv_num_token");
}

extern "C" int mori_ep_device_info(int device, char *arch, size_t arch_size, int *sms) {
  props_t p;
  status_t e = gpu(GetDeviceProperties)(&p, device);
  if (e != GPU_SUCCESS) return fail(e, "querying the device");
#if defined(MORI_DEVICE_COMPILER_HIP)
  snprintf(arch, arch_size, "%s", p.gcnArchName);
  char *colon = strchr(arch, ':');
  if (colon) *colon = 0;
#else
  snprintf(arch, arch_size, "sm_%d%d", p.major, p.minor);
#endif
  *sms = p.multiProcessorCount;
  return 0;
}
