// The shim maps only a control block that cannot be shrunk under it.
#include "control_block_check.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "gpushare/protocol/control_block.h"

namespace {

using gpushare::shim::control_block_problem;

int block(size_t size, int seals) {
  int fd = memfd_create("test-control", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) return -1;
  if (seals && fcntl(fd, F_ADD_SEALS, seals) != 0) return -1;
  return fd;
}

std::string problem(int fd) {
  const char* p = control_block_problem(fd);
  if (fd >= 0) ::close(fd);
  return p ? p : "";
}

constexpr size_t kSize = gpushare::protocol::kControlBlockSize;
constexpr int kAll = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

TEST(ControlBlockCheck, TakesWhatTheDaemonSends) {
  EXPECT_EQ(problem(block(kSize, kAll)), "");
}

TEST(ControlBlockCheck, RefusesAnUnsealedOrShrinkableBlock) {
  EXPECT_NE(problem(block(kSize, 0)).find("not sealed against shrinking"), std::string::npos);
  EXPECT_NE(problem(block(kSize, F_SEAL_GROW | F_SEAL_SEAL)).find("shrinking"), std::string::npos);
  EXPECT_NE(problem(block(kSize, F_SEAL_SHRINK | F_SEAL_SEAL)).find("growing"), std::string::npos);
  // Without F_SEAL_SEAL the seals could still change: refused too.
  EXPECT_NE(problem(block(kSize, F_SEAL_SHRINK | F_SEAL_GROW)).find("F_SEAL_SEAL"),
            std::string::npos);
}

TEST(ControlBlockCheck, RefusesTheWrongSizeAndWhatIsNotAMemfd) {
  EXPECT_NE(problem(block(kSize / 2, kAll)).find("wrong size"), std::string::npos);
  EXPECT_NE(problem(block(kSize * 2, kAll)).find("wrong size"), std::string::npos);
  // An ordinary file (no seals possible) and no descriptor at all.
  EXPECT_NE(problem(::open("/dev/null", O_RDWR | O_CLOEXEC)).find("not a sealable memfd"),
            std::string::npos);
  EXPECT_NE(problem(-1).find("no control block"), std::string::npos);
}

}  // namespace
