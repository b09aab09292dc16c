#include "driver_api.h"

#include <dlfcn.h>

#include <cstring>

namespace gpushare::clients {

std::string resolve_by_proc_address(DriverApi& api, ProcLookup lookup, void* context) {
#define CLIENT_RESOLVE(field, base, exact, per_thread)                                \
  {                                                                                   \
    void* pfn = nullptr;                                                              \
    if (lookup(context, #base, &pfn) != CUDA_SUCCESS || pfn == nullptr) return #base; \
    api.field = reinterpret_cast<decltype(api.field)>(pfn);                           \
  }
  CLIENT_DRIVER_API(CLIENT_RESOLVE)
#undef CLIENT_RESOLVE
  return "";
}

std::string resolve_by_symbol(DriverApi& api, SymbolLookup lookup, void* context, bool per_thread) {
#define CLIENT_RESOLVE(field, base, exact, pt)            \
  {                                                       \
    const char* name = per_thread ? #pt : #exact;         \
    void* p = lookup(context, name);                      \
    if (p == nullptr) return name;                        \
    api.field = reinterpret_cast<decltype(api.field)>(p); \
  }
  CLIENT_DRIVER_API(CLIENT_RESOLVE)
#undef CLIENT_RESOLVE
  return "";
}

namespace {
struct CudartLookup {
  void* self = nullptr;  // what the driver answered for "cuGetProcAddress"
  bool v2 = true;        // cudaVersion >= 12000: the answer has the _v2 shape
  int cuda_version = 0;
  cuuint64_t flags = 0;
  CudartResolution* result = nullptr;
};

CUresult cudart_lookup(void* context, const char* name, void** pfn) {
  auto* c = static_cast<CudartLookup*>(context);
  CUresult r;
  if (c->v2) {
    CUdriverProcAddressQueryResult status{};
    r = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(c->self)(name, pfn, c->cuda_version,
                                                                  c->flags, &status);
    if (r == CUDA_SUCCESS && status != CU_GET_PROC_ADDRESS_SUCCESS) r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS) ++c->result->proc_address_calls_v2;
  } else {
    r = reinterpret_cast<decltype(&cuGetProcAddress)>(c->self)(name, pfn, c->cuda_version,
                                                               c->flags);
    if (r == CUDA_SUCCESS) ++c->result->proc_address_calls_v1;
  }
  return r;
}
}  // namespace

CudartResolution resolve_cudart_style(DriverApi& api, int cuda_version, bool per_thread) {
  CudartResolution result;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) return result.error = "dlopen libcuda.so.1 failed", result;
  CudartLookup c;
  c.cuda_version = cuda_version;
  c.flags =
      per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
  // A cudart older than 12.0 knows only cuGetProcAddress (and gets it back from the self-lookup).
  c.v2 = cuda_version >= 12000;
  c.result = &result;
  c.self = dlsym(lib, c.v2 ? "cuGetProcAddress_v2" : "cuGetProcAddress");
  if (c.self == nullptr) return result.error = "dlsym found no cuGetProcAddress", result;
  void* self = nullptr;
  if (cudart_lookup(&c, "cuGetProcAddress", &self) != CUDA_SUCCESS || self == nullptr) {
    return result.error = "self-lookup of cuGetProcAddress failed", result;
  }
  c.self = self;
  if (std::string missing = resolve_by_proc_address(api, cudart_lookup, &c); !missing.empty()) {
    return result.error = "cannot resolve " + missing, result;
  }
  // cudart also asks for names this driver may not have; the answer must stay NOT_FOUND.
  void* absent = nullptr;
  if (cudart_lookup(&c, "cuGpushareNoSuchSymbol", &absent) != CUDA_ERROR_NOT_FOUND ||
      absent != nullptr) {
    return result.error = "lookup of an unknown symbol did not answer NOT_FOUND", result;
  }
  ++result.failed_lookups;
  return result;
}

std::string symbol_of(const void* p) {
  Dl_info info{};
  if (p == nullptr || dladdr(p, &info) == 0 || info.dli_sname == nullptr) return "";
  return info.dli_sname;
}

std::string object_of(const void* p) {
  Dl_info info{};
  if (p == nullptr || dladdr(p, &info) == 0 || info.dli_fname == nullptr) return "";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash != nullptr ? slash + 1 : info.dli_fname;
}
}  // namespace gpushare::clients
