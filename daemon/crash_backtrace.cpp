#include "crash_backtrace.h"

#define UNW_LOCAL_ONLY
#include <cxxabi.h>
#include <libunwind.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpushare::daemon {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
constexpr int kMaxFrames = 64;

void write_text(const char* text, size_t length) {
  while (length > 0) {
    ssize_t n = ::write(STDERR_FILENO, text, length);
    if (n <= 0) return;
    text += n;
    length -= static_cast<size_t>(n);
  }
}

// Runs on the alternate stack, so a stack overflow can still be reported. The process is dying:
// the demangler's malloc is a risk worth taking for a readable trace.
void on_fatal_signal(int signo, siginfo_t* info, void*) {
  char line[1024];
  int n = info && info->si_code <= 0  // sent with kill(2) and friends, not raised by a fault
              ? std::snprintf(line, sizeof line,
                              "gpushared: fatal signal %d (%s) sent by pid %d; backtrace:\n", signo,
                              strsignal(signo), static_cast<int>(info->si_pid))
              : std::snprintf(line, sizeof line,
                              "gpushared: fatal signal %d (%s) at address %p; backtrace:\n", signo,
                              strsignal(signo), info ? info->si_addr : nullptr);
  write_text(line, static_cast<size_t>(n));
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) == 0 && unw_init_local(&cursor, &context) == 0) {
    for (int frame = 0; frame < kMaxFrames && unw_step(&cursor) > 0; ++frame) {
      unw_word_t ip = 0, offset = 0;
      unw_get_reg(&cursor, UNW_REG_IP, &ip);
      char symbol[512] = "??";
      unw_get_proc_name(&cursor, symbol, sizeof symbol, &offset);
      int status = -1;
      char* demangled = abi::__cxa_demangle(symbol, nullptr, nullptr, &status);
      n = std::snprintf(line, sizeof line, "  #%-2d 0x%016lx %s+0x%lx\n", frame,
                        static_cast<unsigned long>(ip), status == 0 ? demangled : symbol,
                        static_cast<unsigned long>(offset));
      if (n > 0) write_text(line, std::min(static_cast<size_t>(n), sizeof line - 1));
      std::free(demangled);
    }
  }
  // SA_RESETHAND restored the default action: die of the same signal.
  raise(signo);
}

}  // namespace

void install_crash_backtrace() {
  static char alternate_stack[64 * 1024];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof alternate_stack;
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (int s : kFatalSignals) sigaction(s, &action, nullptr);
}

}  // namespace gpushare::daemon
