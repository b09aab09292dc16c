#include "nvml_usage.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace gpushare::daemon {
namespace {

// From NVIDIA's public nvml.h: return codes, and usedGpuMemory's "not available".
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlInsufficientSize = 7;
constexpr uint64_t kValueNotAvailable = ~uint64_t{0};
// The largest entry any nvml.h has used for a process (see parse_process_infos); the buffer is
// sized for it, so a library that writes larger entries than we parse still stays inside it.
constexpr size_t kLargestEntry = 32;
constexpr unsigned kMaxDevices = 64;
constexpr unsigned kFirstCapacity = 64, kMaxProcesses = 4096;

using nvmlDevice_t = void*;
using Init = int (*)();
using Shutdown = int (*)();
using GetCount = int (*)(unsigned*);
using GetHandle = int (*)(unsigned, nvmlDevice_t*);
using GetProcesses = int (*)(nvmlDevice_t, unsigned*, void*);
using GetProcessName = int (*)(unsigned, char*, unsigned);

// The MPS server's program; /proc/<pid>/comm holds its first 15 characters.
bool names_mps_server(std::string name) {
  if (auto slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  return name.rfind("nvidia-cuda-mps", 0) == 0 && name != "nvidia-cuda-mps-control";
}

}  // namespace

struct NvmlLibrary::Api {
  Shutdown shutdown = nullptr;
  GetCount count = nullptr;
  GetHandle handle = nullptr;
  GetProcesses processes = nullptr;
  GetProcessName process_name = nullptr;  // optional
};

std::optional<std::vector<ProcessUse>> parse_process_infos(const uint8_t* entries, size_t count,
                                                           size_t stride) {
  // Every layout starts with `unsigned int pid` and, 8-byte aligned, `unsigned long long
  // usedGpuMemory`.
  std::vector<ProcessUse> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t pid = 0;
    uint64_t bytes = 0;
    std::memcpy(&pid, entries + i * stride, sizeof pid);
    std::memcpy(&bytes, entries + i * stride + 8, sizeof bytes);
    if (pid == 0) return std::nullopt;
    out.push_back(ProcessUse{
        pid, bytes == kValueNotAvailable ? std::nullopt : std::optional<uint64_t>(bytes)});
  }
  return out;
}

std::unique_ptr<NvmlLibrary> NvmlLibrary::open(const char* soname, std::string* why) {
  void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* error = dlerror();
    *why = error ? error : "dlopen failed";
    return nullptr;
  }
  auto symbol = [&](const char* name) { return dlsym(handle, name); };
  std::unique_ptr<NvmlLibrary> nvml(new NvmlLibrary);
  nvml->handle_ = handle;
  nvml->api_ = std::make_unique<Api>();
  Api& api = *nvml->api_;
  auto init = reinterpret_cast<Init>(symbol("nvmlInit_v2"));
  api.shutdown = reinterpret_cast<Shutdown>(symbol("nvmlShutdown"));
  api.count = reinterpret_cast<GetCount>(symbol("nvmlDeviceGetCount_v2"));
  api.handle = reinterpret_cast<GetHandle>(symbol("nvmlDeviceGetHandleByIndex_v2"));
  api.process_name = reinterpret_cast<GetProcessName>(symbol("nvmlSystemGetProcessName"));
  // The newest the library has: _v3 and _v2 fill nvmlProcessInfo_v2_t, the first one _v1_t.
  for (auto [name, stride] :
       {std::pair<const char*, size_t>{"nvmlDeviceGetComputeRunningProcesses_v3", 24},
        {"nvmlDeviceGetComputeRunningProcesses_v2", 24},
        {"nvmlDeviceGetComputeRunningProcesses", 16}}) {
    if (void* f = symbol(name)) {
      api.processes = reinterpret_cast<GetProcesses>(f);
      nvml->processes_symbol_ = name;
      nvml->stride_ = stride;
      break;
    }
  }
  if (!init || !api.shutdown || !api.count || !api.handle || !api.processes) {
    *why = std::string(soname) +
           " lacks the calls needed (nvmlInit_v2, nvmlDeviceGetCount_v2, "
           "nvmlDeviceGetHandleByIndex_v2, "
           "nvmlDeviceGetComputeRunningProcesses)";
    nvml->api_->shutdown = nullptr;  // never initialised: nothing to shut down
    return nullptr;
  }
  if (int r = init(); r != kNvmlSuccess) {
    *why = "nvmlInit_v2 returned " + std::to_string(r);
    nvml->api_->shutdown = nullptr;
    return nullptr;
  }
  return nvml;
}

NvmlLibrary::~NvmlLibrary() {
  if (api_ && api_->shutdown) api_->shutdown();
  // The library stays loaded: the driver's own threads may still run in it.
}

std::optional<std::vector<ProcessUse>> NvmlLibrary::processes(void* device) {
  unsigned capacity = kFirstCapacity;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<uint64_t> buffer(capacity * kLargestEntry / sizeof(uint64_t), 0);
    unsigned count = capacity;
    int r = api_->processes(device, &count, buffer.data());
    if (r == kNvmlInsufficientSize) {
      // More processes than room: ask again with what it says it needs (bounded), plus a few
      // that may start meanwhile.
      if (count <= capacity || capacity >= kMaxProcesses) return std::nullopt;
      capacity = std::min(count + 16, kMaxProcesses);
      continue;
    }
    if (r != kNvmlSuccess) return std::nullopt;
    size_t n = std::min(count, capacity);
    auto* entries = reinterpret_cast<const uint8_t*>(buffer.data());
    if (auto list = parse_process_infos(entries, n, stride_)) return list;
    // A library built from the header whose nvmlProcessInfo_t had a fifth field: 32-byte entries.
    if (stride_ == 24) {
      if (auto list = parse_process_infos(entries, n, 32)) {
        stride_ = 32;
        return list;
      }
    }
    return std::nullopt;
  }
  return std::nullopt;
}

bool NvmlLibrary::is_mps_server(uint32_t pid) {
  char name[256] = {};
  if (api_->process_name && api_->process_name(pid, name, sizeof name - 1) == kNvmlSuccess)
    return names_mps_server(name);
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string line;
  return std::getline(comm, line) && names_mps_server(line);
}

NvmlReading NvmlLibrary::read() {
  NvmlReading reading;
  unsigned count = 0;
  if (api_->count(&count) != kNvmlSuccess) return reading;
  for (unsigned i = 0; i < std::min(count, kMaxDevices); ++i) {
    nvmlDevice_t device = nullptr;
    if (api_->handle(i, &device) != kNvmlSuccess || !device) continue;
    auto list = processes(device);
    if (!list) continue;
    DeviceProcesses d;
    d.index = i;
    d.processes = std::move(*list);
    for (const ProcessUse& p : d.processes)
      if (is_mps_server(p.pid)) d.mps_server = true;
    reading.devices.push_back(std::move(d));
  }
  return reading;
}

NvmlSampler::NvmlSampler(std::unique_ptr<NvmlLibrary> nvml, std::chrono::milliseconds period)
    : nvml_(std::move(nvml)), period_(period) {
  thread_ = std::thread([this] { loop(); });
}

NvmlSampler::~NvmlSampler() {
  std::unique_lock lock(mutex_);
  stop_ = true;
  wake_.notify_all();
  // A driver call that hangs must not hang the daemon's exit: wait a little, then leave the
  // thread (and the library it is in) to the process's end.
  if (finished_cv_.wait_for(lock, std::chrono::seconds(2), [this] { return finished_; })) {
    lock.unlock();
    thread_.join();
  } else {
    lock.unlock();
    thread_.detach();
    (void)nvml_.release();
  }
}

void NvmlSampler::loop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    NvmlReading reading = nvml_->read();
    lock.lock();
    latest_ = std::move(reading);
    ++generation_;
    wake_.wait_for(lock, period_, [this] { return stop_; });
  }
  finished_ = true;
  finished_cv_.notify_all();
}

std::optional<NvmlReading> NvmlSampler::take_new(uint64_t* seen) {
  std::lock_guard lock(mutex_);
  if (generation_ == *seen) return std::nullopt;
  *seen = generation_;
  return latest_;
}

std::unique_ptr<NvmlSampler> start_nvml_sampler(std::chrono::milliseconds period,
                                                const char* soname) {
  if (period.count() == 0) {
    spdlog::info("declarations are not checked against NVML (memory.nvml_sample_ms is 0)");
    return nullptr;
  }
  std::string why;
  std::unique_ptr<NvmlLibrary> nvml = NvmlLibrary::open(soname, &why);
  if (!nvml) {
    spdlog::info("declarations are not checked against real use: NVML unavailable ({})", why);
    return nullptr;
  }
  spdlog::info("declarations checked against NVML's per-process memory every {} ms ({})",
               period.count(), nvml->processes_symbol());
  return std::make_unique<NvmlSampler>(std::move(nvml), period);
}

}  // namespace gpushare::daemon
