// Driver entry points the shim calls that are not hooked (so not in the hook table's real-pointer
// table): the memory code's (swap, views) and the in-flight bound's (events). Resolved once from
// the loaded libcuda.so.1 / libnvidia-ml.so.1 with the real dlsym; each is nullptr when the library
// lacks it.
#pragma once

#include "cuda_api.h"
#include "gpushare/protocol/wire.h"

namespace gpushare::shim {

struct DriverCalls {
  CUresult (*ctx_get_current)(CUcontext*);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*ctx_synchronize)();
  CUresult (*device_get_count)(int*);
  CUresult (*device_get_uuid)(CUuuid*, CUdevice);  // cuDeviceGetUuid_v2, else cuDeviceGetUuid
  CUresult (*prefetch_v2)(CUdeviceptr, size_t, CUmemLocation, unsigned int, CUstream);
  CUresult (*prefetch_v1)(CUdeviceptr, size_t, CUdevice, CUstream);  // before CUDA 12.2
  CUresult (*advise_v2)(CUdeviceptr, size_t, CUmem_advise, CUmemLocation);
  CUresult (*advise_v1)(CUdeviceptr, size_t, CUmem_advise, CUdevice);
  nvmlReturn_t (*nvml_device_get_index)(nvmlDevice_t, unsigned int*);
  // The in-flight bound (shim/in_flight.cpp).
  CUresult (*event_create)(CUevent*, unsigned int);
  CUresult (*event_record)(CUevent, CUstream);
  CUresult (*event_record_ptsz)(CUevent, CUstream);
  CUresult (*event_query)(CUevent);
  CUresult (*event_synchronize)(CUevent);
  CUresult (*event_destroy)(CUevent);
  CUresult (*exchange_capture_mode)(CUstreamCaptureMode*);
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*);
  CUresult (*stream_is_capturing_ptsz)(CUstream, CUstreamCaptureStatus*);
};

// Resolved on first use (thread-safe); the CUDA part needs libcuda.so.1 already loaded.
const DriverCalls& driver_calls();

// Moves / advises [ptr, ptr + bytes) to the host (device < 0) or to `device`, through whichever
// ABI version the driver has.
CUresult prefetch(CUdeviceptr ptr, size_t bytes, int device);
CUresult advise_preferred(CUdeviceptr ptr, size_t bytes, int device);

// The UUID of every CUDA ordinal of the process (shim/visible_devices.h). Count 0 when the driver
// cannot tell (no such entry point, a failed call).
protocol::DeviceUuids device_uuids();

}  // namespace gpushare::shim
