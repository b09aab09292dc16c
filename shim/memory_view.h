// The job's view of device memory: inside a job, cuMemGetInfo,
// cuDeviceTotalMem and NVML's memory info report total = min(job limit, device capacity) and
// free = what the job may still allocate, as the daemon publishes them in the control block.
// Without a daemon (or before it published a view of the device) the driver's answer stands.
// These only ever overwrite the outputs of a call that succeeded: they never add an error.
#pragma once

#include <cstddef>

#include "cuda_api.h"

namespace gpushare::shim {

// The view of the calling thread's context device.
void view_mem_info(size_t* free_bytes, size_t* total_bytes);
// The view of CUDA ordinal `device`.
void view_total_mem(size_t* bytes, CUdevice device);
// NVML's memory structures (v1 and v2) for an NVML device handle.
void view_nvml_memory(nvmlDevice_t device, nvmlMemory_t* memory);
void view_nvml_memory(nvmlDevice_t device, nvmlMemory_v2_t* memory);

}  // namespace gpushare::shim
