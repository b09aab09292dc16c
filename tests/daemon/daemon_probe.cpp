// A CUDA program for the daemon tests, run with the shim preloaded and the fake driver: it loads
// libcuda.so.1 the way programs do (dlopen + dlsym, which the shim intercepts), and then obeys
// one command per line on stdin, answering one line on stdout:
//
//   init                       cuInit + context          -> "ok"
//   use-device <ordinal>       that device's primary context made current -> "ok"
//   alloc <bytes>              cuMemAlloc_v2              -> "ok <pointer>"
//   free <pointer>             cuMemFree_v2               -> "ok"
//   launch <count> <us>        cuLaunchKernel spin_<us>   -> "ok"
//   block                      the control block in force -> "block <job_id> <class> <launches>"
//   wait-block <timeout_ms>    waits for a control block the shim had not mapped before (a
//                              (re-)registration)         -> "block <job_id> <class> <launches>"
//   close-sockets              closes every socket descriptor behind the shim's back (as
//                              daemonising code does) and reuses the lowest number for /dev/null
//                                                         -> "ok <reused fd>"
//   check-fd <fd>              is that descriptor still open? -> "ok" / "error closed"
//   wait-class <class> <timeout_ms>
//                              waits for job_class in the current block -> "class <class> <t_ns>"
//                              where t_ns is CLOCK_MONOTONIC when it was seen
//
// The control block is found like a debugger would: the shim's memfd mapping, named
// "gpushare-control", in /proc/self/maps. Any failure answers "error <what>".
#include <dlfcn.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gpushare/protocol/control_block.h"
#include "probe_driver.h"

namespace {

using gpushare::protocol::ControlBlock;

using gpushare::clients::ProbeDriver;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void sleep_ms(int ms) {
  timespec ts{0, ms * 1000000L};
  nanosleep(&ts, nullptr);
}

// Control-block mappings of this process: inode -> address.
std::set<std::pair<unsigned long, uintptr_t>> control_mappings() {
  std::set<std::pair<unsigned long, uintptr_t>> found;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/memfd:gpushare-control") == std::string::npos) continue;
    uintptr_t start = 0;
    unsigned long inode = 0;
    char perms[8], offset[32], dev[32];
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%*x %7s %31s %31s %lu", &start, perms, offset, dev,
                    &inode) == 5)
      found.insert({inode, start});
  }
  return found;
}

struct Probe {
  ProbeDriver cu{};
  CUmodule module = nullptr;
  std::set<unsigned long> seen_inodes;
  const ControlBlock* current = nullptr;

  // Adopts a mapping not seen before, if there is one.
  bool adopt_new_block() {
    for (const auto& [inode, address] : control_mappings()) {
      if (seen_inodes.count(inode)) continue;
      seen_inodes.insert(inode);
      current = reinterpret_cast<const ControlBlock*>(address);
      return true;
    }
    return false;
  }

  std::string describe_block() const {
    if (!current) return "error no control block";
    char text[128];
    std::snprintf(text, sizeof text, "block %" PRIu64 " %s %" PRIu64, current->job_id,
                  current->job_class.load() == 0 ? "production" : "opportunistic",
                  current->launches.load());
    return text;
  }

  std::string run(const std::string& line) {
    std::istringstream in(line);
    std::string command;
    in >> command;
    if (command == "init") {
      if (std::string error = gpushare::clients::init_context(cu, &module); !error.empty())
        return error;
      adopt_new_block();
      return "ok";
    }
    if (command == "use-device") {
      int ordinal = -1;
      in >> ordinal;
      CUdevice device;
      CUcontext context;
      if (cu.device_get(&device, ordinal) != CUDA_SUCCESS ||
          cu.primary_ctx_retain(&context, device) != CUDA_SUCCESS ||
          cu.ctx_set_current(context) != CUDA_SUCCESS)
        return "error context";
      return "ok";
    }
    if (command == "alloc") {
      size_t bytes = 0;
      in >> bytes;
      CUdeviceptr p = 0;
      if (cu.mem_alloc(&p, bytes) != CUDA_SUCCESS) return "error cuMemAlloc";
      return "ok " + std::to_string(p);
    }
    if (command == "free") {
      unsigned long long p = 0;
      in >> p;
      return cu.mem_free(static_cast<CUdeviceptr>(p)) == CUDA_SUCCESS ? "ok" : "error cuMemFree";
    }
    if (command == "launch") {
      int count = 0, us = 0;
      in >> count >> us;
      CUfunction f;
      std::string name = "spin_" + std::to_string(us);
      if (cu.module_get_function(&f, module, name.c_str()) != CUDA_SUCCESS) return "error function";
      for (int i = 0; i < count; ++i)
        if (cu.launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS)
          return "error cuLaunchKernel";
      return "ok";
    }
    if (command == "block") return describe_block();
    if (command == "close-sockets") {
      std::vector<int> sockets;
      for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
        if (target.rfind("socket:", 0) == 0) sockets.push_back(std::stoi(entry.path().filename()));
      }
      if (sockets.empty()) return "error no socket";
      for (int fd : sockets) ::close(fd);
      int reused = ::open("/dev/null", O_WRONLY);
      return "ok " + std::to_string(reused);
    }
    if (command == "check-fd") {
      int fd = -1;
      in >> fd;
      return fcntl(fd, F_GETFD) != -1 ? "ok" : "error closed";
    }
    if (command == "wait-block") {
      int timeout_ms = 0;
      in >> timeout_ms;
      for (int waited = 0; !adopt_new_block(); waited += 5) {
        if (waited >= timeout_ms) return "error timeout";
        sleep_ms(5);
      }
      return describe_block();
    }
    if (command == "getenv") {  // what the shim set in this process (MPS client settings)
      std::string name;
      in >> name;
      const char* value = std::getenv(name.c_str());
      return value ? "env " + std::string(value) : "env (unset)";
    }
    if (command == "wait-class") {
      std::string wanted;
      int timeout_ms = 0;
      in >> wanted >> timeout_ms;
      if (!current) return "error no control block";
      uint32_t code = wanted == "production" ? 0 : 1;
      uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
      while (current->job_class.load() != code) {
        if (now_ns() > deadline) return "error timeout";
        timespec ts{0, 200000};  // 0.2 ms: the measured latency is what the test reports
        nanosleep(&ts, nullptr);
      }
      return "class " + wanted + " " + std::to_string(now_ns());
    }
    return "error unknown command " + command;
  }
};

}  // namespace

int main() {
  void* library = dlopen("libcuda.so.1", RTLD_NOW);
  if (!library) {
    std::printf("error dlopen %s\n", dlerror());
    return 1;
  }
  Probe probe;
  if (!gpushare::clients::resolve_probe_driver(library, probe.cu)) {
    std::printf("error dlsym\n");
    return 1;
  }
  std::printf("ready %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
    std::printf("%s\n", probe.run(line).c_str());
    std::fflush(stdout);
  }
  return 0;
}
