// Read-only view of the fake driver's simulated devices, for tests: maps the device file and reads
// what every process did on each device (kernels executed, busy time, memory by process).
//
//   gpushare::fake::DeviceView view(path);   // or DeviceView{} for the default path
//   if (view.ok()) view.kernels(0);
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "device_file.h"

namespace gpushare::fake {

class DeviceView {
 public:
  explicit DeviceView(const std::string& path = device_file_path()) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= sizeof(DeviceFile)) {
      void* p = mmap(nullptr, sizeof(DeviceFile), PROT_READ, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) file_ = static_cast<const DeviceFile*>(p);
    }
    close(fd);
    if (file_ != nullptr && load(file_->magic) != kDeviceFileMagic) {
      munmap(const_cast<DeviceFile*>(file_), sizeof(DeviceFile));
      file_ = nullptr;
    }
  }
  ~DeviceView() {
    if (file_ != nullptr) munmap(const_cast<DeviceFile*>(file_), sizeof(DeviceFile));
  }
  DeviceView(const DeviceView&) = delete;
  DeviceView& operator=(const DeviceView&) = delete;

  // False when the file does not exist (yet) or is not an initialised device file.
  bool ok() const { return file_ != nullptr; }
  int device_count() const { return ok() ? static_cast<int>(load(file_->device_count)) : 0; }
  // Each accessor returns 0 for a device that does not exist.
  uint64_t capacity_bytes(int d) const { return dev(d) ? load(dev(d)->capacity_bytes) : 0; }
  uint64_t used_bytes(int d) const { return dev(d) ? load(dev(d)->used_bytes) : 0; }
  uint64_t managed_bytes(int d) const { return dev(d) ? load(dev(d)->managed_bytes) : 0; }
  uint64_t kernels(int d) const { return dev(d) ? load(dev(d)->kernels) : 0; }
  uint64_t busy_ns(int d) const { return dev(d) ? load(dev(d)->busy_ns) : 0; }
  // Bytes the fake driver accounts to `pid` on device d (0 when it holds none, or was reclaimed).
  uint64_t bytes_of_pid(int d, int pid) const {
    if (!dev(d)) return 0;
    for (const ProcessMemory& p : dev(d)->processes) {
      if (load(p.pid) == pid) return load(p.bytes);
    }
    return 0;
  }
  // Tickets taken and served on the engine: equal when nobody holds or waits for it.
  uint32_t tickets_taken(int d) const { return dev(d) ? load(dev(d)->engine.next_ticket) : 0; }
  uint32_t tickets_served(int d) const { return dev(d) ? load(dev(d)->engine.now_serving) : 0; }

 private:
  template <class T>
  static T load(const T& field) {
    return __atomic_load_n(&field, __ATOMIC_ACQUIRE);
  }
  const DeviceState* dev(int d) const {
    return d >= 0 && d < device_count() && d < kMaxDevices ? &file_->devices[d] : nullptr;
  }

  const DeviceFile* file_ = nullptr;
};
}  // namespace gpushare::fake
