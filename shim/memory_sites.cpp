#include "memory_sites.h"

#include <dlfcn.h>
#include <execinfo.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "daemon_link.h"
#include "gpushare/protocol/wire.h"
#include "settings.h"

namespace gpushare::shim {
namespace {

constexpr int kMaxFrames = 24;
constexpr int kSiteFrames = 4;  // frames outside the shim that tell sites apart

// The load address of the shim itself, whose frames are skipped.
const void* shim_base() {
  static const void* base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(&shim_base), &info) ? info.dli_fbase : nullptr;
  }();
  return base;
}

std::string describe(void* frame) {
  Dl_info info{};
  char text[160];
  if (!dladdr(frame, &info) || !info.dli_fname) {
    std::snprintf(text, sizeof text, "%p", frame);
    return text;
  }
  const char* file = std::strrchr(info.dli_fname, '/');
  file = file ? file + 1 : info.dli_fname;
  if (info.dli_sname && info.dli_saddr)
    std::snprintf(
        text, sizeof text, "%s(%s+0x%zx)", file, info.dli_sname,
        static_cast<size_t>(static_cast<char*>(frame) - static_cast<char*>(info.dli_saddr)));
  else
    std::snprintf(
        text, sizeof text, "%s+0x%zx", file,
        static_cast<size_t>(static_cast<char*>(frame) - static_cast<char*>(info.dli_fbase)));
  return text;
}

}  // namespace

uint32_t allocation_site() {
  if (!settings().trace_alloc) return 0;
  void* frames[kMaxFrames];
  int n = backtrace(frames, kMaxFrames);
  void* outside[kSiteFrames];
  int kept = 0;
  for (int i = 0; i < n && kept < kSiteFrames; ++i) {
    Dl_info info{};
    if (dladdr(frames[i], &info) && info.dli_fbase == shim_base()) continue;
    outside[kept++] = frames[i];
  }
  uint32_t site = 2166136261u;  // FNV-1a over the return addresses
  for (int i = 0; i < kept; ++i) {
    auto address = reinterpret_cast<uintptr_t>(outside[i]);
    for (int b = 0; b < 8; ++b) site = (site ^ ((address >> (8 * b)) & 0xff)) * 16777619u;
  }
  if (site == 0) site = 1;

  static std::mutex mutex;
  static std::set<uint32_t>* announced = new std::set<uint32_t>;  // leaked: used during exit
  {
    std::lock_guard lock(mutex);
    if (!announced->insert(site).second) return site;
  }
  std::string text;
  for (int i = 0; i < kept; ++i) text += (i ? " < " : "") + describe(outside[i]);
  daemon_link_announce_site(site, text.c_str());
  return site;
}

}  // namespace gpushare::shim
