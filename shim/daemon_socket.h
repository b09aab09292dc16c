// One conversation with gpushared on a socket: connect, send a request, receive the one reply it
// expects (docs/protocol.md). The frames are protocol/framing.h's; this adds what the shim asks of
// every exchange: a bounded wait, the reply's type and size checked, and a descriptor it did not
// ask for closed. No state: the link (daemon_link_state.h) owns the registered connection.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpushare/protocol/wire.h"

namespace gpushare::shim {

// Any single send, receive or connect with the daemon.
inline constexpr int kIoTimeoutMs = 2000;

// A new connection to the daemon's socket, or -1 with *why (strerror) set.
int connect_daemon(const char* socket_path, int timeout_ms, const char** why);

bool send_message(int fd, protocol::MessageType type, const void* payload, size_t length);

// Receives one frame of type `type` into `payload` (exactly `length` bytes). A passed descriptor
// lands in *passed_fd when asked for, else is closed. An error reply's text lands in error_text
// when given. Returns false on timeout, EOF or a bad frame.
bool receive_reply(int fd, protocol::MessageType type, void* payload, size_t length, int* passed_fd,
                   char* error_text, size_t error_size);

// Waits up to `timeout_ms` for a reply to arrive (the socket's own timeout is kIoTimeoutMs).
bool wait_for_reply(int fd, int timeout_ms);

// The inode of `fd` when it is a socket, else 0: how the link recognises its own descriptor.
uint64_t socket_inode(int fd);

}  // namespace gpushare::shim
