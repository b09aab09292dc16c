// Sending and receiving one frame on the gpushared socket, written once for the shim, the daemon,
// gpusharectl and the tests.
//
// The socket is SOCK_SEQPACKET: one sendmsg is one datagram is one frame, so a frame is the header
// and the payload gathered in one call, and a receive either gets a whole frame or reports that it
// was cut (MSG_TRUNC). A descriptor travels beside a frame as SCM_RIGHTS (the daemon's control
// block memfd at registration). These functions only move bytes and descriptors: what a frame
// means, and whether it is well formed (check_frame in wire.h), is the caller's to decide.
//
// Safe for the shim: no allocation, no exceptions, EINTR retried, SIGPIPE never raised.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "wire.h"

namespace gpushare::protocol {

// Connects a client (the shim, gpusharectl) to gpushared's SOCK_SEQPACKET socket at `path`, with
// close-on-exec; `timeout_ms` bounds the connect and then every send and receive on the socket.
// Returns the descriptor, or -1 with errno set (ENAMETOOLONG: `path` does not fit sockaddr_un).
int connect_to_daemon(const char* path, int timeout_ms);

enum class SendResult { sent, would_block, failed };

// Sends the header and `length` payload bytes as one frame. `pass_fd` >= 0 goes along with
// SCM_RIGHTS. `flags` adds to MSG_NOSIGNAL (MSG_DONTWAIT for the daemon, which never blocks).
SendResult send_frame(int fd, MessageType type, const void* payload, size_t length,
                      int pass_fd = -1, int flags = 0);

// Sends a header whose fields the caller chose (tests that speak a wrong version or length).
SendResult send_raw_frame(int fd, const FrameHeader& header, const void* payload, size_t length,
                          int flags = 0);

// The most descriptors one receive keeps; more are closed and counted as dropped.
inline constexpr int kMaxReceivedFds = 4;

struct Received {
  ssize_t bytes = -1;              // header and payload; 0 at end of stream; -1 with `error` set
  int error = 0;                   // errno of a failed receive (EAGAIN when nothing waits)
  bool truncated = false;          // the frame was larger than the buffer (MSG_TRUNC)
  bool control_truncated = false;  // descriptors were lost (MSG_CTRUNC)
  int fds[kMaxReceivedFds] = {-1, -1, -1, -1};
  int fd_count = 0;  // descriptors kept in `fds`; the caller owns them
  int fds_dropped = 0;

  // Hands the first descriptor to the caller (or -1) and closes the rest.
  int take_first_fd();
  // Closes every descriptor still held.
  void close_fds();
  bool any_fds() const { return fd_count > 0 || fds_dropped > 0 || control_truncated; }
};

// Receives one frame into `buffer` (header included), with close-on-exec on passed descriptors.
// `flags` adds to the recvmsg flags (MSG_DONTWAIT for the daemon).
Received receive_frame(int fd, void* buffer, size_t size, int flags = 0);

}  // namespace gpushare::protocol
