// The CUDA driver API declarations the shim (and the fake driver) compile against.
// __CUDA_API_VERSION_INTERNAL turns off cuda.h's renaming macros (cuMemAlloc -> cuMemAlloc_v2,
// cuGetProcAddress -> cuGetProcAddress_v2, ...), so that every versioned name in the hook table
// is the exact exported symbol, as the driver itself sees it.
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

// NVML is not part of the toolkit headers we build against; these are the ABI-stable pieces of
// nvml.h that the memory-info hooks need (NVML API v2 layouts).
extern "C" {
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;
typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
}
inline constexpr nvmlReturn_t kNvmlSuccess = 0;
inline constexpr nvmlReturn_t kNvmlErrorUninitialized = 1;
