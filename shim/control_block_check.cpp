#include "control_block_check.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "gpushare/protocol/control_block.h"

namespace gpushare::shim {

const char* control_block_problem(int memfd) {
  if (memfd < 0) return "the reply carried no control block";
  int seals = fcntl(memfd, F_GET_SEALS);
  if (seals < 0) return "the control block is not a sealable memfd";
  if (!(seals & F_SEAL_SHRINK)) return "the control block is not sealed against shrinking";
  if (!(seals & F_SEAL_GROW)) return "the control block is not sealed against growing";
  if (!(seals & F_SEAL_SEAL)) return "the control block's seals are not final (no F_SEAL_SEAL)";
  struct stat st;
  if (fstat(memfd, &st) != 0) return "the control block cannot be examined (fstat failed)";
  if (st.st_size != static_cast<off_t>(protocol::kControlBlockSize))
    return "the control block has the wrong size";
  return nullptr;
}

}  // namespace gpushare::shim
