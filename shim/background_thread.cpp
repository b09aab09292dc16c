#include "background_thread.h"

#include <pthread.h>
#include <signal.h>

namespace gpushare::shim {

bool start_background_thread(void* (*body)(void*)) {
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);  // the new thread inherits this mask
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  bool ok = pthread_create(&thread, &attr, body, nullptr) == 0;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return ok;
}

}  // namespace gpushare::shim
