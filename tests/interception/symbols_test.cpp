// The hook table against the outside world: every hooked CUDA name is a real driver symbol
// (nm -D of the toolkit's stub libcuda.so) and implemented by the fake driver; libgpushare.so
// exports exactly the hooked names plus dlsym (both versions) and needs no C++ runtime.
#include <cstdio>
#include <set>
#include <sstream>

#include "client_harness.h"
#include "hooks.h"

namespace gpushare::testing {
namespace {

using gpushare::shim::kHooks;
using gpushare::shim::Library;

std::string command_output(const std::string& command) {
  std::string text;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return text;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
  pclose(pipe);
  return text;
}

// Defined dynamic symbols of a library, as "name" or "name@version" / "name@@version".
std::set<std::string> dynamic_symbols(const std::string& library) {
  std::set<std::string> names;
  std::istringstream in(command_output("nm -D --defined-only " + library));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string address, type, name;
    if (fields >> address >> type >> name && type != "A") names.insert(name);
  }
  return names;
}

std::set<std::string> unversioned(const std::set<std::string>& names) {
  std::set<std::string> out;
  for (const std::string& n : names) out.insert(n.substr(0, n.find('@')));
  return out;
}

std::set<std::string> hooked_names(Library lib) {
  std::set<std::string> names;
  for (const auto& hook : kHooks) {
    if (hook.library == lib) names.insert(hook.name);
  }
  return names;
}

TEST(HookTable, EveryCudaNameIsAnExportOfTheToolkitStub) {
  std::set<std::string> stub = unversioned(dynamic_symbols(GPUSHARE_CUDA_STUB));
  ASSERT_FALSE(stub.empty()) << "nm -D found nothing in " << GPUSHARE_CUDA_STUB;
  for (const std::string& name : hooked_names(Library::cuda)) {
    EXPECT_TRUE(stub.count(name)) << name << " is not a symbol of the real driver";
  }
}

TEST(HookTable, FakeDriverImplementsEveryHookedName) {
  std::set<std::string> cuda = unversioned(dynamic_symbols(kFakeDriverDir + "/libcuda.so.1"));
  for (const std::string& name : hooked_names(Library::cuda)) EXPECT_TRUE(cuda.count(name)) << name;
  std::set<std::string> nvml = unversioned(dynamic_symbols(kFakeDriverDir + "/libnvidia-ml.so.1"));
  for (const std::string& name : hooked_names(Library::nvml)) EXPECT_TRUE(nvml.count(name)) << name;
}

TEST(ShimLibrary, ExportsExactlyTheHookedNamesAndDlsym) {
  std::set<std::string> exported = dynamic_symbols(kShim);
  std::set<std::string> expected = hooked_names(Library::cuda);
  expected.merge(hooked_names(Library::nvml));
  expected.insert("dlsym");
  EXPECT_EQ(unversioned(exported), expected);
  // dlsym under both glibc versions: old binaries bind dlsym@GLIBC_2.2.5, new ones GLIBC_2.34.
  std::set<std::string> dlsym_versions;
  for (const std::string& n : exported) {
    if (n.rfind("dlsym@", 0) == 0) dlsym_versions.insert(n.substr(n.rfind('@') + 1));
  }
  EXPECT_EQ(dlsym_versions, (std::set<std::string>{"GLIBC_2.2.5", "GLIBC_2.34"}));
}

TEST(ShimLibrary, NeedsNoCxxRuntime) {
  std::string dynamic = command_output("readelf -d " + kShim);
  ASSERT_NE(dynamic.find("NEEDED"), std::string::npos) << "readelf -d failed";
  EXPECT_EQ(dynamic.find("libstdc++"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("libgcc_s"), std::string::npos) << dynamic;
}
}  // namespace
}  // namespace gpushare::testing
