// SPDX-License-Identifier: MIT
// Device-generic access to torch's current device and stream: through the
// device-guard interface, never c10/cuda, so one source builds against CUDA
// and ROCm torch (ROCm torch presents its GPUs as DeviceType::CUDA too).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace mori_torch {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::CUDA;

inline c10::Device GpuDevice(int index) { return c10::Device(kDeviceType, static_cast<c10::DeviceIndex>(index)); }

inline int CurrentDevice() { return c10::impl::VirtualGuardImpl(kDeviceType).getDevice().index(); }

// The current stream of `device`, as the runtime's handle (cudaStream_t / hipStream_t).
inline void *CurrentStream(int device) {
  return c10::impl::VirtualGuardImpl(kDeviceType).getStream(GpuDevice(device)).native_handle();
}

}  // namespace mori_torch
