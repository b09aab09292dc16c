// The shim's own threads (the daemon watcher, the swap thread): detached, small stacks, and no
// signals, so the host program's handlers and sigwait() loops stay its own.
#pragma once

namespace gpushare::shim {

// Returns false when the thread could not be created.
bool start_background_thread(void* (*body)(void*));

}  // namespace gpushare::shim
