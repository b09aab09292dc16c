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

namespace {

void sample_until_stopped(const std::shared_ptr<NvmlSampler::Shared>& shared,
                          const std::string& soname, std::chrono::milliseconds period) {
  std::string why;
  std::unique_ptr<NvmlLibrary> nvml = NvmlLibrary::open(soname.c_str(), &why);
  if (!nvml)
    spdlog::info("declarations are not checked against real use: NVML unavailable ({})", why);
  else
    spdlog::info("declarations checked against NVML's per-process memory every {} ms ({})",
                 period.count(), nvml->processes_symbol());
  std::unique_lock lock(shared->mutex);
  while (nvml && !shared->stop) {
    lock.unlock();
    NvmlReading reading = nvml->read();
    lock.lock();
    shared->latest = std::move(reading);
    ++shared->generation;
    shared->wake.wait_for(lock, period, [&] { return shared->stop; });
  }
  shared->finished = true;
  shared->finished_cv.notify_all();
  lock.unlock();
  nvml.reset();  // nvmlShutdown, on the thread that used it
}

}  // namespace

NvmlSampler::NvmlSampler(std::string soname, std::chrono::milliseconds period) {
  thread_ = std::thread([shared = shared_, soname = std::move(soname), period] {
    sample_until_stopped(shared, soname, period);
  });
}

NvmlSampler::~NvmlSampler() {
  std::unique_lock lock(shared_->mutex);
  shared_->stop = true;
  shared_->wake.notify_all();
  // A driver call that hangs must not hang the daemon's exit: wait a little, then leave the
  // thread, which owns what it uses, to the process's end.
  bool finished = shared_->finished_cv.wait_for(lock, std::chrono::seconds(2),
                                                [&] { return shared_->finished; });
  lock.unlock();
  if (finished)
    thread_.join();
  else
    thread_.detach();
}

std::optional<NvmlReading> NvmlSampler::take_new(uint64_t* seen) {
  std::lock_guard lock(shared_->mutex);
  if (shared_->generation == *seen) return std::nullopt;
  *seen = shared_->generation;
  return shared_->latest;
}

std::unique_ptr<NvmlSampler> start_nvml_sampler(std::chrono::milliseconds period,
                                                const char* soname) {
  if (period.count() == 0) {
    spdlog::info("declarations are not checked against NVML (memory.nvml_sample_ms is 0)");
    return nullptr;
  }
  return std::make_unique<NvmlSampler>(soname, period);
}

}  // namespace gpushare::daemon
