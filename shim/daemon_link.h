// The shim's side of the shim <-> gpushared link (DESIGN.md §2, docs/protocol.md).
//
// Everything here is off the launch path: registration happens once, on the first cuInit, and
// allocation declarations are rare. The launch path only touches the control block that
// `control_block()` points at.
#pragma once

#include <cstdint>

#include "gpushare/protocol/control_block.h"
#include "gpushare/protocol/wire.h"
#include "shim_context.h"

namespace gpushare::shim {

struct Settings;

// The daemon_link_* functions are in the link's files (daemon_link_state.h lists them), except
// daemon_link_before_init, in mps_client.cpp. The control block the link puts in force is the
// process context's (shim_context.h, gate.h).

using protocol::AllocKind;

// Called once from the first cuInit, never from a constructor (so never under the loader lock).
// Connects and registers, or starts the background retry when the daemon is absent (one warning).
// Returns false only when settings.require_daemon is set and the daemon cannot be reached: cuInit
// then fails with CUDA_ERROR_NOT_INITIALIZED... (see shim/families.h).
bool daemon_link_start(const Settings& settings);

// Called by every cuInit BEFORE the real one (shim/families.h); does its work once per process:
// asks the daemon whether this process is an MPS client and puts the CUDA_MPS_* variables in the
// environment, which the driver reads at initialisation (shim/mps_client.cpp, docs/mps.md). Never
// fails the program: no daemon, no answer, or no MPS leaves the environment as it is.
void daemon_link_before_init();

// Declares memory to the daemon, when connected: `flags` are protocol::MemDeclareFlags bits (a
// reservation before the allocation, its commit after; docs/memory.md). Waits for the answer
// (the daemon may first move other jobs' memory to host). Returns true when the daemon admits it,
// and always when not connected or the daemon does not answer (fail-open). `device` is the CUDA
// ordinal. Thread-safe.
bool daemon_link_declare(uint64_t handle, uint64_t bytes, int device, AllocKind kind,
                         uint32_t flags, uint32_t site);
// Releases a handle or a reservation token.
void daemon_link_declare_free(uint64_t handle, int device);
// GPUSHARE_TRACE_ALLOC: describes an allocation site id to the daemon.
void daemon_link_announce_site(uint32_t site, const char* text);
// The physical device index of a CUDA ordinal (CUDA_VISIBLE_DEVICES).
int daemon_link_physical_device(int ordinal);

// pthread_atfork child handler: the child is a new process with a new pid; it drops the parent's
// connection (without telling the daemon) and registers afresh on its next cuInit.
void daemon_link_after_fork_child();
}  // namespace gpushare::shim
