// On SIGSEGV, SIGABRT, SIGBUS, SIGFPE or SIGILL, gpushared writes a symbolized backtrace
// (libunwind) to stderr, which systemd puts in the journal, then dies of the same signal so a core
// dump and the exit status stay truthful.
#pragma once

namespace gpushare::daemon {

void install_crash_backtrace();

}  // namespace gpushare::daemon
