// SPDX-License-Identifier: MIT
/* The name map under gpu_vmm.c: CUDA's driver API and HIP spell the same
 * virtual-memory calls differently, and this header gives each call, type
 * and constant one name for both. gpu_vmm.c is written once against these
 * names; cuda.c and hip.c (one per build) load the table `gpu` and keep the
 * few things that really differ (contexts vs devices, compatibility values,
 * stream memory operations, the copy engine).
 *
 * GPU_FUNCS(X) lists every runtime entry point as X(field, symbol); the
 * symbol is expanded before it is turned into a string, so CUDA's versioned
 * names (cuMemAlloc -> cuMemAlloc_v2) are what dlsym looks up. */
#ifndef MORI_CORE_PLATFORM_GPU_API_H
#define MORI_CORE_PLATFORM_GPU_API_H

#include "core/platform/platform.h"

#if defined(MORI_PLATFORM_CUDA)

#include <cuda.h>

typedef CUresult gpu_status_t;
typedef CUdeviceptr gpu_va_t;
typedef CUmemGenericAllocationHandle gpu_mem_t;
typedef CUmemAllocationProp gpu_alloc_prop_t;
typedef CUmemAccessDesc gpu_access_t;
typedef CUuuid gpu_uuid_t;
typedef CUcontext gpu_saved_t; /* the caller's context, put back on leave */
typedef CUstream gpu_stream_t;
typedef CUmodule gpu_module_t;
typedef CUipcMemHandle gpu_ipc_handle_t;
typedef CUstreamCaptureMode gpu_capture_mode_t;
#define GPU_CAPTURE_MODE_RELAXED CU_STREAM_CAPTURE_MODE_RELAXED
typedef CUstreamCaptureStatus gpu_capture_status_t;
#define GPU_CAPTURE_STATUS_NONE CU_STREAM_CAPTURE_STATUS_NONE
#define GPU_IPC_LAZY_PEER_ACCESS CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS

#define GPU_OK CUDA_SUCCESS
#define GPU_ATTR_CC_MAJOR CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
#define GPU_ATTR_CC_MINOR CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
#define GPU_ERR_NOT_FOUND CUDA_ERROR_NOT_FOUND
#define GPU_ERR_OUT_OF_MEMORY CUDA_ERROR_OUT_OF_MEMORY
#define GPU_ERR_INVALID_VALUE CUDA_ERROR_INVALID_VALUE
#define GPU_ERR_ALREADY_REGISTERED CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
#define GPU_ERR_NOT_PERMITTED CUDA_ERROR_NOT_PERMITTED
#define GPU_ERR_NOT_SUPPORTED CUDA_ERROR_NOT_SUPPORTED
#define GPU_ERR_NO_DEVICE CUDA_ERROR_NO_DEVICE
#define GPU_ALLOC_PINNED CU_MEM_ALLOCATION_TYPE_PINNED
/* CUDA's VMM has no uncached allocation type: normal memory (platform.h). */
#define GPU_ALLOC_UNCACHED CU_MEM_ALLOCATION_TYPE_PINNED
#define GPU_LOCATION_DEVICE CU_MEM_LOCATION_TYPE_DEVICE
#define GPU_HANDLE_POSIX_FD CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
#define GPU_HANDLE_FABRIC CU_MEM_HANDLE_TYPE_FABRIC
#define GPU_ACCESS_READ_WRITE CU_MEM_ACCESS_FLAGS_PROT_READWRITE
#define GPU_GRANULARITY_MINIMUM CU_MEM_ALLOC_GRANULARITY_MINIMUM
#define GPU_HOST_ALLOC_FLAGS (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)
#define GPU_HOST_REGISTER_FLAGS(io) \
  (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | ((io) ? CU_MEMHOSTREGISTER_IOMEMORY : 0))
#define GPU_PROP_HANDLE_TYPES(prop) ((prop).requestedHandleTypes)
/* The fd travels in the pointer argument itself. */
#define GPU_IMPORT_FD_ARG(fd_ptr) ((void *)(uintptr_t)(*(fd_ptr)))
#define GPU_MEMCPY(dst, src, n) gpu.copy((gpu_va_t)(uintptr_t)(dst), (gpu_va_t)(uintptr_t)(src), (n))
#define GPU_STREAM_CREATE_NONBLOCKING(st) gpu.streamCreate((st), CU_STREAM_NON_BLOCKING)
#define GPU_UPLOAD_ASYNC(dst, src, n, st) gpu.memcpyHtoDAsync((CUdeviceptr)(uintptr_t)(dst), (src), (n), (st))
/* A NIC registers VMM memory (GPUDirect RDMA: dma-buf or peer memory) only
 * when cuMemCreate made it RDMA-capable, which the device may allow. */
#define GPU_PROP_RDMA_CAPABLE(prop, device)                                                                        \
  do {                                                                                                             \
    int rdma_ok_ = 0;                                                                                              \
    if (gpu.deviceGetAttribute(&rdma_ok_, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, (device)) == \
            CUDA_SUCCESS &&                                                                                        \
        rdma_ok_)                                                                                                  \
      (prop).allocFlags.gpuDirectRDMACapable = 1;                                                                  \
  } while (0)

#define GPU_FUNCS(X)                                           \
  X(memGetAllocationGranularity, cuMemGetAllocationGranularity) \
  X(memCreate, cuMemCreate)                                    \
  X(memRelease, cuMemRelease)                                  \
  X(memExportToShareableHandle, cuMemExportToShareableHandle)  \
  X(memImportFromShareableHandle, cuMemImportFromShareableHandle) \
  X(memRetainAllocationHandle, cuMemRetainAllocationHandle)    \
  X(memGetAllocationPropertiesFromHandle, cuMemGetAllocationPropertiesFromHandle) \
  X(memGetAddressRange, cuMemGetAddressRange)                  \
  X(memAddressReserve, cuMemAddressReserve)                    \
  X(memAddressFree, cuMemAddressFree)                          \
  X(memMap, cuMemMap)                                          \
  X(memUnmap, cuMemUnmap)                                      \
  X(memSetAccess, cuMemSetAccess)                              \
  X(memsetD8, cuMemsetD8)                                      \
  X(memsetD8Async, cuMemsetD8Async)                            \
  X(copy, cuMemcpy)                                          \
  X(synchronize, cuCtxSynchronize)                             \
  X(deviceMalloc, cuMemAlloc)                                        \
  X(deviceFree, cuMemFree)                                           \
  X(hostAlloc, cuMemHostAlloc)                                 \
  X(hostGetDevicePointer, cuMemHostGetDevicePointer)           \
  X(hostFree, cuMemFreeHost)                                   \
  X(hostRegister, cuMemHostRegister)                           \
  X(hostUnregister, cuMemHostUnregister)                       \
  X(getDeviceCount, cuDeviceGetCount)                          \
  X(deviceGetUuid, cuDeviceGetUuid)                            \
  X(deviceGetPCIBusId, cuDeviceGetPCIBusId)                    \
  X(deviceGetName, cuDeviceGetName)                            \
  X(moduleGetGlobal, cuModuleGetGlobal)                        \
  X(ipcGetMemHandle, cuIpcGetMemHandle)                        \
  X(ipcOpenMemHandle, cuIpcOpenMemHandle)                      \
  X(ipcCloseMemHandle, cuIpcCloseMemHandle)                    \
  X(threadExchangeCaptureMode, cuThreadExchangeStreamCaptureMode) \
  CUDA_ONLY_FUNCS(X)

/* What only cuda.c calls: contexts, device handles, streams, memops. */
#define CUDA_ONLY_FUNCS(X)                                 \
  X(init, cuInit)                                          \
  X(getErrorName, cuGetErrorName)                          \
  X(getErrorString, cuGetErrorString)                      \
  X(deviceGet, cuDeviceGet)                                \
  X(deviceCanAccessPeer, cuDeviceCanAccessPeer)            \
  X(deviceGetAttribute, cuDeviceGetAttribute)              \
  X(devicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)      \
  X(ctxSetCurrent, cuCtxSetCurrent)                        \
  X(ctxGetCurrent, cuCtxGetCurrent)                        \
  X(ctxGetDevice, cuCtxGetDevice)                          \
  X(streamCreate, cuStreamCreate)                          \
  X(streamSynchronize, cuStreamSynchronize)                \
  X(streamDestroy, cuStreamDestroy)                        \
  X(memcpyAsync, cuMemcpyAsync)                            \
  X(memcpyHtoDAsync, cuMemcpyHtoDAsync)                    \
  X(streamBatchMemOp, cuStreamBatchMemOp)                  \
  X(streamIsCapturing, cuStreamIsCapturing)             \
  X(moduleLoadData, cuModuleLoadData)                      \
  X(moduleGetFunction, cuModuleGetFunction)                \
  X(launchKernel, cuLaunchKernel)                          \
  X(eventCreate, cuEventCreate)                            \
  X(eventRecord, cuEventRecord)                            \
  X(eventQuery, cuEventQuery)                              \
  X(eventSynchronize, cuEventSynchronize)                  \
  X(eventDestroy, cuEventDestroy)                          \
  X(pointerGetAttribute, cuPointerGetAttribute)

#elif defined(MORI_PLATFORM_HIP)

#include "core/platform/hip_compat.h"

typedef hipError_t gpu_status_t;
typedef void *gpu_va_t;
typedef hipMemGenericAllocationHandle_t gpu_mem_t;
typedef hipMemAllocationProp gpu_alloc_prop_t;
typedef hipMemAccessDesc gpu_access_t;
typedef hipUUID gpu_uuid_t;
typedef int gpu_saved_t; /* the caller's device, put back on leave */
typedef hipStream_t gpu_stream_t;
typedef hipModule_t gpu_module_t;
typedef hipIpcMemHandle_t gpu_ipc_handle_t;
typedef hipStreamCaptureMode gpu_capture_mode_t;
#define GPU_CAPTURE_MODE_RELAXED hipStreamCaptureModeRelaxed
typedef hipStreamCaptureStatus gpu_capture_status_t;
#define GPU_CAPTURE_STATUS_NONE hipStreamCaptureStatusNone
#define GPU_IPC_LAZY_PEER_ACCESS hipIpcMemLazyEnablePeerAccess

#define GPU_OK hipSuccess
#define GPU_ATTR_CC_MAJOR hipDeviceAttributeComputeCapabilityMajor
#define GPU_ATTR_CC_MINOR hipDeviceAttributeComputeCapabilityMinor
#define GPU_ERR_NOT_FOUND hipErrorNotFound
#define GPU_ERR_OUT_OF_MEMORY hipErrorOutOfMemory
#define GPU_ERR_INVALID_VALUE hipErrorInvalidValue
#define GPU_ERR_ALREADY_REGISTERED hipErrorHostMemoryAlreadyRegistered
#define GPU_ERR_NOT_PERMITTED hipErrorNotSupported
#define GPU_ERR_NOT_SUPPORTED hipErrorNotSupported
#define GPU_ERR_NO_DEVICE hipErrorNoDevice
#define GPU_ALLOC_PINNED hipMemAllocationTypePinned
#define GPU_ALLOC_UNCACHED MORI_HIP_ALLOC_UNCACHED
#define GPU_LOCATION_DEVICE hipMemLocationTypeDevice
#define GPU_HANDLE_POSIX_FD hipMemHandleTypePosixFileDescriptor
#define GPU_HANDLE_FABRIC MORI_HIP_HANDLE_TYPE_FABRIC
#define GPU_ACCESS_READ_WRITE hipMemAccessFlagsProtReadWrite
#define GPU_GRANULARITY_MINIMUM hipMemAllocationGranularityMinimum
#define GPU_HOST_ALLOC_FLAGS (hipHostMallocMapped | hipHostMallocPortable)
#define GPU_HOST_REGISTER_FLAGS(io) (hipHostRegisterPortable | hipHostRegisterMapped | ((io) ? hipHostRegisterIoMemory : 0))
#define GPU_PROP_HANDLE_TYPES(prop) MORI_HIP_PROP_HANDLE_TYPES(prop)
#define GPU_IMPORT_FD_ARG(fd_ptr) MORI_HIP_IMPORT_FD_ARG(fd_ptr)
#define GPU_MEMCPY(dst, src, n) gpu.copy((dst), (src), (n), hipMemcpyDefault)
#define GPU_STREAM_CREATE_NONBLOCKING(st) gpu.streamCreateWithFlags((st), hipStreamNonBlocking)
#define GPU_UPLOAD_ASYNC(dst, src, n, st) gpu.memcpyAsync((dst), (src), (n), hipMemcpyHostToDevice, (st))
/* HIP's allocations need no flag for a NIC to register them. */
#define GPU_PROP_RDMA_CAPABLE(prop, device) ((void)0)

#define GPU_FUNCS(X)                                            \
  X(memGetAllocationGranularity, hipMemGetAllocationGranularity) \
  X(memCreate, hipMemCreate)                                    \
  X(memRelease, hipMemRelease)                                  \
  X(memExportToShareableHandle, hipMemExportToShareableHandle)  \
  X(memImportFromShareableHandle, hipMemImportFromShareableHandle) \
  X(memRetainAllocationHandle, hipMemRetainAllocationHandle)    \
  X(memGetAllocationPropertiesFromHandle, hipMemGetAllocationPropertiesFromHandle) \
  X(memGetAddressRange, hipMemGetAddressRange)                  \
  X(memAddressReserve, hipMemAddressReserve)                    \
  X(memAddressFree, hipMemAddressFree)                          \
  X(memMap, hipMemMap)                                          \
  X(memUnmap, hipMemUnmap)                                      \
  X(memSetAccess, hipMemSetAccess)                              \
  X(memsetD8, hipMemset)                                        \
  X(memsetD8Async, hipMemsetAsync)                              \
  X(copy, hipMemcpy)                                          \
  X(synchronize, hipDeviceSynchronize)                          \
  X(deviceMalloc, hipMalloc)                                          \
  X(deviceFree, hipFree)                                              \
  X(hostAlloc, hipHostMalloc)                                   \
  X(hostGetDevicePointer, hipHostGetDevicePointer)              \
  X(hostFree, hipHostFree)                                      \
  X(hostRegister, hipHostRegister)                              \
  X(hostUnregister, hipHostUnregister)                          \
  X(getDeviceCount, hipGetDeviceCount)                          \
  X(deviceGetUuid, hipDeviceGetUuid)                            \
  X(deviceGetPCIBusId, hipDeviceGetPCIBusId)                    \
  X(deviceGetName, hipDeviceGetName)                            \
  X(moduleGetGlobal, hipModuleGetGlobal)                        \
  X(ipcGetMemHandle, hipIpcGetMemHandle)                        \
  X(ipcOpenMemHandle, hipIpcOpenMemHandle)                      \
  X(ipcCloseMemHandle, hipIpcCloseMemHandle)                    \
  X(threadExchangeCaptureMode, hipThreadExchangeStreamCaptureMode) \
  HIP_ONLY_FUNCS(X)

/* What only hip.c calls. */
#define HIP_ONLY_FUNCS(X)                            \
  X(getErrorName, hipGetErrorName)                   \
  X(getErrorString, hipGetErrorString)               \
  X(getLastError, hipGetLastError)                   \
  X(setDevice, hipSetDevice)                         \
  X(deviceGetAttribute, hipDeviceGetAttribute)       \
  X(getDevice, hipGetDevice)                         \
  X(deviceCanAccessPeer, hipDeviceCanAccessPeer)     \
  X(streamWriteValue64, hipStreamWriteValue64)       \
  X(streamWaitValue64, hipStreamWaitValue64)       \
  X(streamSynchronize, hipStreamSynchronize)       \
  X(streamCreateWithFlags, hipStreamCreateWithFlags) \
  X(memcpyAsync, hipMemcpyAsync)                     \
  X(streamIsCapturing, hipStreamIsCapturing)        \
  X(pointerGetAttributes, hipPointerGetAttributes)

#else
#error "gpu_api.h is for the cuda and hip platforms"
#endif

/* A pointer as the runtime's address type, and back. */
#define VA(p) ((gpu_va_t)(uintptr_t)(p))
#define PTR(v) ((void *)(uintptr_t)(v))

/* The loaded entry points. */
struct gpu_funcs {
#define GPU_FIELD(field, symbol) __typeof__(symbol) *field;
  GPU_FUNCS(GPU_FIELD)
#undef GPU_FIELD
};
extern struct gpu_funcs gpu;

/* ---- what cuda.c / hip.c provide to gpu_vmm.c ---- */

/* Loads the runtime once; 0 or a clear error (MORI_ENO_GPU when absent). */
int gpu_ready(void);
/* Makes `device` current, remembering the caller's state in *saved. */
int gpu_enter(int device, gpu_saved_t *saved);
void gpu_leave(const gpu_saved_t *saved);
/* Whether `p` is device memory (the runtime's own answer, no failing call
 * for device or mapped host memory); *yes false for anything else. */
int gpu_is_device_memory(const void *p, bool *yes);
/* The one place a runtime status becomes a mori code (and a message). */
int gpu_fail(gpu_status_t status, const char *what);
/* Whether `device` can map `peer_device`'s memory (peer access). */
int gpu_peer_access(int device, int peer_device, bool *yes);

#define GPU_TRY(call, ...)                             \
  do {                                                 \
    gpu_status_t gpu_s_ = (call);                      \
    if (gpu_s_ != GPU_OK) {                            \
      char gpu_what_[256];                             \
      snprintf(gpu_what_, sizeof(gpu_what_), __VA_ARGS__); \
      return gpu_fail(gpu_s_, gpu_what_);              \
    }                                                  \
  } while (0)

/* Runs `expr` (an int-valued expression) with `device` current. */
#define GPU_ON_DEVICE(device, expr)              \
  __extension__({                                \
    gpu_saved_t gpu_saved_;                      \
    int gpu_rc_ = gpu_enter((device), &gpu_saved_); \
    if (gpu_rc_ == 0) {                          \
      gpu_rc_ = (expr);                          \
      gpu_leave(&gpu_saved_);                    \
    }                                            \
    gpu_rc_;                                     \
  })

#endif
