// Frame checks of protocol/wire.h, the first thing the daemon does with received bytes.
#include "gpushare/protocol/wire.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpushare::protocol {
namespace {

std::vector<uint8_t> frame(FrameHeader h, size_t payload_bytes) {
  std::vector<uint8_t> f(sizeof h + payload_bytes, 0);
  std::memcpy(f.data(), &h, sizeof h);
  return f;
}

FrameError check(const std::vector<uint8_t>& f) {
  return check_frame(f.data(), f.size(), nullptr);
}

TEST(Wire, WellFormedFramesPass) {
  EXPECT_EQ(check(frame(make_header(MessageType::register_request, sizeof(RegisterRequest)),
                        sizeof(RegisterRequest))),
            FrameError::none);
  EXPECT_EQ(check(frame(make_header(MessageType::ctl_request, 17), 17)), FrameError::none);
  EXPECT_EQ(
      check(frame(make_header(MessageType::mem_release, sizeof(MemRelease)), sizeof(MemRelease))),
      FrameError::none);
}

TEST(Wire, EachDefectIsNamed) {
  std::vector<uint8_t> tiny(5, 0);
  EXPECT_EQ(check(tiny), FrameError::short_header);
  FrameHeader h = make_header(MessageType::mem_declare, sizeof(MemDeclare));
  h.magic = 0x12345678;
  EXPECT_EQ(check(frame(h, sizeof(MemDeclare))), FrameError::bad_magic);
  h = make_header(MessageType::mem_declare, sizeof(MemDeclare));
  h.version = 2;
  EXPECT_EQ(check(frame(h, sizeof(MemDeclare))), FrameError::bad_version);
  h = make_header(MessageType::ctl_request, kMaxPayload + 1);
  EXPECT_EQ(check(frame(h, 10)), FrameError::oversized);
  h = make_header(MessageType::ctl_request, 100);
  EXPECT_EQ(check(frame(h, 50)), FrameError::length_mismatch);  // truncated
  h = make_header(static_cast<MessageType>(99), 0);
  EXPECT_EQ(check(frame(h, 0)), FrameError::unknown_type);
  h = make_header(MessageType::mem_declare, sizeof(MemDeclare) - 1);
  EXPECT_EQ(check(frame(h, sizeof(MemDeclare) - 1)), FrameError::bad_size);
}

TEST(Wire, TextFieldsAreAlwaysTerminated) {
  char field[8];
  copy_text(field, "a-very-long-name");
  EXPECT_STREQ(field, "a-very-");
  EXPECT_TRUE(terminated(field));
  std::memset(field, 'x', sizeof field);
  EXPECT_FALSE(terminated(field));
}

}  // namespace
}  // namespace gpushare::protocol
