#include "torch_backend/signal_kernels.h"

#include "mori/device.h"

#if defined(MORI_DEVICE_COMPILER_HIP)
typedef hipStream_t stream_t;
#define launch_error() hipGetLastError()
#define error_string hipGetErrorString
#define LAUNCH_OK hipSuccess
#else
typedef cudaStream_t stream_t;
#define launch_error() cudaGetLastError()
#define error_string cudaGetErrorString
#define LAUNCH_OK cudaSuccess
#endif

static const char *last_launch_error = "";
const char *mori_torch_launch_error(void) { return last_launch_error; }

static int check_launch(void) {
  auto e = launch_error();
  if (e == LAUNCH_OK) return 0;
  last_launch_error = error_string(e);
  return -1005; /* MORI_ERUNTIME */
}

__global__ void barrier_kernel(mori_window_dev_t view, int channel, uint64_t timeout_ns) {
  mori_barrier_block(view, (uint32_t)channel, timeout_ns);
}

__global__ void put_signal_kernel(mori_window_dev_t view, int dst, int channel, uint64_t timeout_ns) {
  mori_fence_system(); /* the stream's earlier writes go before the signal */
  mori_pad_put(view, dst, (uint32_t)channel, timeout_ns);
}

__global__ void wait_signal_kernel(mori_window_dev_t view, int src, int channel, uint64_t timeout_ns) {
  mori_pad_wait(view, src, (uint32_t)channel, timeout_ns);
  mori_fence_system();
}

int mori_torch_launch_barrier(mori_window_dev_t view, int channel, uint64_t timeout_ns, void *stream) {
  int threads = (view.lsa_size + 31) / 32 * 32;
  barrier_kernel<<<1, threads, 0, (stream_t)stream>>>(view, channel, timeout_ns);
  return check_launch();
}

int mori_torch_launch_put_signal(mori_window_dev_t view, int dst_rank, int channel, uint64_t timeout_ns, void *stream) {
  put_signal_kernel<<<1, 1, 0, (stream_t)stream>>>(view, dst_rank, channel, timeout_ns);
  return check_launch();
}

int mori_torch_launch_wait_signal(mori_window_dev_t view, int src_rank, int channel, uint64_t timeout_ns, void *stream) {
  wait_signal_kernel<<<1, 1, 0, (stream_t)stream>>>(view, src_rank, channel, timeout_ns);
  return check_launch();
}
