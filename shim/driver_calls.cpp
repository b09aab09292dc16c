#include "driver_calls.h"

#include <cstring>
#include <mutex>

#include "dlsym.h"
#include "hooks.h"

namespace gpushare::shim {
namespace {

template <class Fn>
void find(void* library, const char* name, Fn* out) {
  *out = library ? reinterpret_cast<Fn>(real_dlsym()(library, name)) : nullptr;
}

CUmemLocation location(int device) {
  CUmemLocation l{};
  l.type = device < 0 ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  l.id = device < 0 ? 0 : device;
  return l;
}

}  // namespace

const DriverCalls& driver_calls() {
  static DriverCalls driver{};
  static std::once_flag once;
  std::call_once(once, [] {
    void* cuda = library_handle(Library::cuda, /*load=*/false);
    find(cuda, "cuCtxGetCurrent", &driver.ctx_get_current);
    find(cuda, "cuCtxSetCurrent", &driver.ctx_set_current);
    find(cuda, "cuCtxSynchronize", &driver.ctx_synchronize);
    find(cuda, "cuDeviceGetCount", &driver.device_get_count);
    find(cuda, "cuDeviceGetUuid_v2", &driver.device_get_uuid);
    if (!driver.device_get_uuid) find(cuda, "cuDeviceGetUuid", &driver.device_get_uuid);
    find(cuda, "cuMemPrefetchAsync_v2", &driver.prefetch_v2);
    find(cuda, "cuMemPrefetchAsync", &driver.prefetch_v1);
    find(cuda, "cuMemAdvise_v2", &driver.advise_v2);
    find(cuda, "cuMemAdvise", &driver.advise_v1);
    find(library_handle(Library::nvml, /*load=*/false), "nvmlDeviceGetIndex",
         &driver.nvml_device_get_index);
    find(cuda, "cuEventCreate", &driver.event_create);
    find(cuda, "cuEventRecord", &driver.event_record);
    find(cuda, "cuEventRecord_ptsz", &driver.event_record_ptsz);
    find(cuda, "cuEventQuery", &driver.event_query);
    find(cuda, "cuEventSynchronize", &driver.event_synchronize);
    find(cuda, "cuEventDestroy_v2", &driver.event_destroy);
    find(cuda, "cuThreadExchangeStreamCaptureMode", &driver.exchange_capture_mode);
    find(cuda, "cuStreamIsCapturing", &driver.stream_is_capturing);
    find(cuda, "cuStreamIsCapturing_ptsz", &driver.stream_is_capturing_ptsz);
  });
  return driver;
}

CUresult prefetch(CUdeviceptr ptr, size_t bytes, int device) {
  const DriverCalls& d = driver_calls();
  if (d.prefetch_v2) return d.prefetch_v2(ptr, bytes, location(device), 0, nullptr);
  if (d.prefetch_v1) return d.prefetch_v1(ptr, bytes, device < 0 ? CU_DEVICE_CPU : device, nullptr);
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult advise_preferred(CUdeviceptr ptr, size_t bytes, int device) {
  const DriverCalls& d = driver_calls();
  if (d.advise_v2)
    return d.advise_v2(ptr, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, location(device));
  if (d.advise_v1)
    return d.advise_v1(ptr, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                       device < 0 ? CU_DEVICE_CPU : device);
  return CUDA_ERROR_NOT_SUPPORTED;
}

protocol::DeviceUuids device_uuids() {
  const DriverCalls& d = driver_calls();
  protocol::DeviceUuids out{};
  int count = 0;
  if (!d.device_get_count || !d.device_get_uuid || d.device_get_count(&count) != CUDA_SUCCESS ||
      count <= 0)
    return out;
  if (count > static_cast<int>(protocol::kMaxDevices)) count = protocol::kMaxDevices;
  for (int i = 0; i < count; ++i) {
    CUuuid uuid{};
    // The CUdevice of ordinal i is i (cuDeviceGet).
    if (d.device_get_uuid(&uuid, i) != CUDA_SUCCESS) return protocol::DeviceUuids{};
    std::memcpy(out.uuids[i], uuid.bytes, protocol::kDeviceUuidSize);
  }
  out.count = static_cast<uint32_t>(count);
  return out;
}

}  // namespace gpushare::shim
