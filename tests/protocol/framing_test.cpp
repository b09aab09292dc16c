// protocol/framing.h over a socketpair: a frame arrives whole with its descriptor, a frame larger
// than the buffer is reported cut, descriptors beyond the kept few are closed, a full peer gives
// would_block rather than blocking the daemon.
#include "gpushare/protocol/framing.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace gpushare::protocol {
namespace {

struct Pair {
  int a = -1, b = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
    a = fds[0];
    b = fds[1];
  }
  ~Pair() {
    ::close(a);
    ::close(b);
  }
};

bool open_fd(int fd) {
  return fcntl(fd, F_GETFD) != -1;
}

TEST(Framing, AFrameArrivesWholeAndChecksWithItsDescriptor) {
  Pair p;
  MpsQuery q{};
  q.requested_class = static_cast<uint32_t>(JobClass::opportunistic);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ASSERT_EQ(send_frame(p.a, MessageType::mps_query, &q, sizeof q, pipe_fds[1]), SendResult::sent);
  ::close(pipe_fds[1]);

  uint8_t buffer[sizeof(FrameHeader) + sizeof q + 1];
  Received r = receive_frame(p.b, buffer, sizeof buffer);
  ASSERT_EQ(r.bytes, static_cast<ssize_t>(sizeof(FrameHeader) + sizeof q));
  EXPECT_FALSE(r.truncated);
  FrameHeader h{};
  EXPECT_EQ(check_frame(buffer, static_cast<size_t>(r.bytes), &h), FrameError::none);
  EXPECT_EQ(h.type, static_cast<uint16_t>(MessageType::mps_query));
  ASSERT_EQ(r.fd_count, 1);
  int passed = r.take_first_fd();
  // The descriptor is the pipe's write end: what goes in comes out of the read end.
  ASSERT_EQ(write(passed, "x", 1), 1);
  char c = 0;
  ASSERT_EQ(read(pipe_fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  EXPECT_NE(fcntl(passed, F_GETFD) & FD_CLOEXEC, 0) << "passed descriptors are close-on-exec";
  ::close(passed);
  ::close(pipe_fds[0]);
}

TEST(Framing, AFrameLargerThanTheBufferIsReportedCut) {
  Pair p;
  std::vector<char> big(1000, 'a');
  ASSERT_EQ(send_frame(p.a, MessageType::ctl_request, big.data(), big.size()), SendResult::sent);
  uint8_t buffer[64];
  Received r = receive_frame(p.b, buffer, sizeof buffer);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.fd_count, 0);
}

TEST(Framing, EndOfStreamReadsZeroAndAnEmptySocketWouldBlock) {
  Pair p;
  uint8_t buffer[64];
  Received empty = receive_frame(p.b, buffer, sizeof buffer, MSG_DONTWAIT);
  EXPECT_EQ(empty.bytes, -1);
  EXPECT_EQ(empty.error, EAGAIN);
  ::shutdown(p.a, SHUT_WR);
  Received eof = receive_frame(p.b, buffer, sizeof buffer);
  EXPECT_EQ(eof.bytes, 0);
}

// Sends `N` descriptors (duplicates of stderr) in one SCM_RIGHTS message beside a ctl frame, by
// hand: send_frame passes one.
template <int N>
void send_descriptors(int socket) {
  int fds[N];
  for (int& f : fds) f = dup(STDERR_FILENO);
  FrameHeader h = make_header(MessageType::ctl_request, 2);
  char payload[2] = {'{', '}'};
  iovec iov[2] = {{&h, sizeof h}, {payload, sizeof payload}};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(cmsg), fds, sizeof fds);
  ASSERT_GT(sendmsg(socket, &msg, 0), 0);
  for (int f : fds) ::close(f);
}

TEST(Framing, DescriptorsBeyondTheKeptFewAreClosedAndCounted) {
  Pair p;
  send_descriptors<6>(p.a);
  uint8_t buffer[64];
  Received r = receive_frame(p.b, buffer, sizeof buffer);
  EXPECT_EQ(r.fd_count, kMaxReceivedFds);
  EXPECT_EQ(r.fds_dropped, 6 - kMaxReceivedFds);
  EXPECT_TRUE(r.any_fds());
  int kept[kMaxReceivedFds];
  std::memcpy(kept, r.fds, sizeof kept);
  r.close_fds();
  EXPECT_EQ(r.fd_count, 0);
  for (int f : kept) EXPECT_FALSE(open_fd(f)) << "descriptor " << f << " left open";
}

TEST(Framing, DescriptorsBeyondTheControlBufferAreReportedLost) {
  Pair p;
  send_descriptors<3 * kMaxReceivedFds>(p.a);
  uint8_t buffer[64];
  Received r = receive_frame(p.b, buffer, sizeof buffer);
  EXPECT_TRUE(r.control_truncated);
  EXPECT_TRUE(r.any_fds());
  r.close_fds();
}

TEST(Framing, AFullPeerGivesWouldBlockNotAStall) {
  Pair p;
  std::vector<char> chunk(4096, 'z');
  SendResult last = SendResult::sent;
  for (int i = 0; i < 100000 && last == SendResult::sent; ++i)
    last = send_frame(p.a, MessageType::ctl_request, chunk.data(), chunk.size(), -1, MSG_DONTWAIT);
  EXPECT_EQ(last, SendResult::would_block);
}

TEST(Framing, ARawHeaderKeepsTheFieldsTheCallerChose) {
  Pair p;
  FrameHeader h = make_header(MessageType::ctl_request, 2);
  h.version = 9;
  ASSERT_EQ(send_raw_frame(p.a, h, "{}", 2), SendResult::sent);
  uint8_t buffer[64];
  Received r = receive_frame(p.b, buffer, sizeof buffer);
  ASSERT_EQ(r.bytes, static_cast<ssize_t>(sizeof h + 2));
  EXPECT_EQ(check_frame(buffer, static_cast<size_t>(r.bytes), nullptr), FrameError::bad_version);
}

TEST(Framing, SendingToAClosedPeerFailsWithoutSigpipe) {
  Pair p;
  ::close(p.b);
  p.b = -1;
  EXPECT_EQ(send_frame(p.a, MessageType::ctl_request, "{}", 2), SendResult::failed);
}

}  // namespace
}  // namespace gpushare::protocol
