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
