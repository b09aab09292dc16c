// The device memory each process really holds, as NVML reports it (nvidia-smi's process list),
// read on a thread of its own so that the event loop never waits for the driver.
//
// libnvidia-ml.so.1 is opened with dlopen at start, never linked: a machine without it (or a
// library without the calls used here) runs as before, with one line in the log. Every number
// NVML returns is checked before use (counts clamped to the buffer, zero pids dropped, errors
// skip the device for that sample), so nothing it returns can stop or stall the daemon's loop.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gpushare::daemon {

struct ProcessUse {
  uint32_t pid = 0;
  std::optional<uint64_t> bytes;  // nullopt: NVML_VALUE_NOT_AVAILABLE (no permission, WDDM)
};

// One device, numbered as NVML numbers it (by PCI bus, not CUDA_VISIBLE_DEVICES).
struct DeviceProcesses {
  unsigned index = 0;
  std::vector<ProcessUse> processes;
  // An MPS server is among them: under MPS, NVML lists the server and not its clients.
  bool mps_server = false;
};

// The devices that answered one reading; a device whose call failed is left out.
struct NvmlReading {
  std::vector<DeviceProcesses> devices;
};

// The entries of one nvmlDeviceGetComputeRunningProcesses answer: `count` entries of `stride`
// bytes (16: nvmlProcessInfo_v1_t; 24: _v2_t, which _v3 also fills in the drivers NVIDIA ships;
// 32: the one header that added usedGpuCcProtectedMemory). nullopt when an entry has pid 0,
// which no process has: the entries were not laid out with this stride.
std::optional<std::vector<ProcessUse>> parse_process_infos(const uint8_t* entries, size_t count,
                                                           size_t stride);

class NvmlLibrary {
 public:
  // dlopen(`soname`) and nvmlInit_v2; nullptr with *why when that is not possible.
  static std::unique_ptr<NvmlLibrary> open(const char* soname, std::string* why);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // Blocks for as long as the driver takes: call it off the event loop.
  NvmlReading read();
  const char* processes_symbol() const { return processes_symbol_; }

  struct Api;

 private:
  NvmlLibrary() = default;
  std::optional<std::vector<ProcessUse>> processes(void* device);
  bool is_mps_server(uint32_t pid);

  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
  const char* processes_symbol_ = "";
  size_t stride_ = 24;
};

// Opens NVML and reads it every `period` on its own thread, keeping the latest reading: nvmlInit
// can take seconds on a GPU without persistence mode, and a wedged GPU can hang any call, so the
// event loop never calls NVML itself. The outcome of opening it is logged once, from the thread.
class NvmlSampler {
 public:
  NvmlSampler(std::string soname, std::chrono::milliseconds period);
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  // The latest reading when it is newer than the one `*seen` names (then updated), else nullopt.
  std::optional<NvmlReading> take_new(uint64_t* seen);

  // What the thread and the sampler share: owned by both, so a thread left behind by a hung
  // driver call never touches a destroyed sampler.
  struct Shared {
    std::mutex mutex;
    std::condition_variable wake, finished_cv;
    bool stop = false, finished = false;
    uint64_t generation = 0;
    NvmlReading latest;
  };

 private:
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::thread thread_;
};

// The sampler the configuration asks for (`memory.nvml_sample_ms`, 0: none, with one line in the
// log), else one that opens `soname` on its thread.
std::unique_ptr<NvmlSampler> start_nvml_sampler(std::chrono::milliseconds period,
                                                const char* soname = "libnvidia-ml.so.1");

}  // namespace gpushare::daemon
