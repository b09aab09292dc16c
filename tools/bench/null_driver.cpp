// A libcuda.so.1 whose launch does nothing, so the benchmark measures the shim and not a driver.
// gpushare_null_launch is the same function under a name the shim does not hook: the "without
// the shim" side of the comparison, in the same process.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

extern "C" {
__attribute__((visibility("default"))) CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }
__attribute__((visibility("default"))) CUresult cuLaunchKernel(CUfunction, unsigned int,
                                                               unsigned int, unsigned int,
                                                               unsigned int, unsigned int,
                                                               unsigned int, unsigned int, CUstream,
                                                               void**, void**) {
  __asm__ volatile("" ::: "memory");  // keep the call from being folded away
  return CUDA_SUCCESS;
}
__attribute__((visibility("default"), alias("cuLaunchKernel"))) CUresult gpushare_null_launch(
    CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
    unsigned int, unsigned int, CUstream, void**, void**);
}

// What the completion marks of a production job call (shim/completions.cpp), as cheap as the
// driver can be: the benchmark's production row measures the shim's side of a mark.
extern "C" {
static int g_null_context;
__attribute__((visibility("default"))) CUresult cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = reinterpret_cast<CUcontext>(&g_null_context);
  return CUDA_SUCCESS;
}
__attribute__((visibility("default"))) CUresult cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
__attribute__((visibility("default"))) CUresult cuEventCreate(CUevent* e, unsigned int) {
  static int event;
  *e = reinterpret_cast<CUevent>(&event);
  return CUDA_SUCCESS;
}
__attribute__((visibility("default"))) CUresult cuEventRecord(CUevent, CUstream) {
  return CUDA_SUCCESS;
}
__attribute__((visibility("default"))) CUresult cuEventQuery(CUevent) { return CUDA_SUCCESS; }
__attribute__((visibility("default"))) CUresult cuEventSynchronize(CUevent) {
  return CUDA_SUCCESS;
}
__attribute__((visibility("default"))) CUresult cuEventDestroy_v2(CUevent) { return CUDA_SUCCESS; }
__attribute__((visibility("default"))) CUresult cuStreamIsCapturing(CUstream,
                                                                    CUstreamCaptureStatus* s) {
  *s = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
__attribute__((visibility("default"))) CUresult cuThreadExchangeStreamCaptureMode(
    CUstreamCaptureMode* mode) {
  *mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  return CUDA_SUCCESS;
}
}
