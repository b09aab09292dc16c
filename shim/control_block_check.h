// Whether a control block the daemon passed may be mapped. The shim maps it
// shared and the launch path touches it on every launch: a peer that shrinks the file afterwards
// would kill the host program with SIGBUS. So only a memfd sealed against shrinking and growing,
// with no more seals allowed, of exactly the control block's size is taken. Whoever listens on
// the socket path is the "daemon" here: where that path is in a world-writable folder (the demo)
// any user can be it.
#pragma once

namespace gpushare::shim {

// nullptr when `memfd` is fit to map; else why not, in words ("not sealed against shrinking").
const char* control_block_problem(int memfd);

}  // namespace gpushare::shim
