// The messages on the gpushared socket (docs/protocol.md is the reference, with the version
// policy).
//
// The socket is AF_UNIX / SOCK_SEQPACKET: one frame per datagram, so a frame is never split or
// merged, and a frame that does not fit the receiver's buffer is reported (MSG_TRUNC) instead of
// bleeding into the next one. Every frame is a FrameHeader followed by `length` payload bytes.
// Shim messages are packed plain structs of fixed size (the shim has no JSON parser on its rare
// path); ctl messages are JSON text (nlohmann on both ends).
//
// Everything here is plain data and constexpr checks: the shim (no exceptions, no allocation on
// this path), the daemon and gpusharectl all include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "control_block.h"

namespace gpushare::protocol {

inline constexpr uint32_t kWireMagic = 0x47505357;  // "GPSW"
// Bumped on any change to a frame's layout or meaning; see "Version policy" in docs/protocol.md.
inline constexpr uint16_t kWireVersion = 1;
// The largest payload either side accepts. It bounds the daemon's receive buffer; a ctl reply
// listing a few thousand jobs still fits. A header announcing more drops the sender.
inline constexpr uint32_t kMaxPayload = 256 * 1024;

inline constexpr size_t kJobNameSize = 64;   // 63 bytes of name + NUL (GPUSHARE_JOB's limit)
inline constexpr size_t kMessageSize = 256;  // human-readable text in replies, NUL-terminated
inline constexpr uint32_t kMaxDevices = 32;  // devices one job may name at registration
inline constexpr int32_t kMaxDeviceIndex = 1023;

enum class MessageType : uint16_t {
  register_request = 1,  // shim -> daemon; answered by register_reply (+ memfd via SCM_RIGHTS)
  register_reply = 2,
  mem_declare = 3,  // shim -> daemon; answered by mem_reply
  mem_reply = 4,
  mem_release = 5,   // shim -> daemon; no reply
  device_info = 6,   // shim -> daemon, before its first declaration on a device; no reply
  alloc_site = 7,    // shim -> daemon, before the first declaration from a site; no reply
  // shim -> daemon on a short connection of its own, BEFORE the real cuInit: may this process be
  // an MPS client, at which priority, through which pipe directory (docs/mps.md). mps_reply.
  mps_query = 8,
  mps_reply = 9,
  ctl_request = 16,  // gpusharectl -> daemon, JSON; answered by ctl_reply, JSON
  ctl_reply = 17,
  error = 32,  // daemon -> any client, just before it closes the connection
};

// How a declared allocation was made (MemDeclare::kind): shown by gpusharectl, checked by the daemon.
enum class AllocKind : uint32_t { linear = 0, pitch = 1, managed = 2, async = 3, pool = 4, vmm = 5 };
inline constexpr uint32_t kMaxAllocKind = static_cast<uint32_t>(AllocKind::vmm);

#pragma pack(push, 1)
struct FrameHeader {
  uint32_t magic;    // kWireMagic
  uint16_t version;  // kWireVersion of the sender
  uint16_t type;     // MessageType
  uint32_t length;   // payload bytes after this header, <= kMaxPayload
};

struct RegisterRequest {
  uint32_t requested_class;  // JobClass
  // The pid as the client sees it (getpid()): differs from the daemon's view inside a pid
  // namespace. Shown in `jobs`, never used as identity: that comes from SO_PEERCRED.
  uint32_t client_pid;
  uint32_t device_count;         // 0: not known (the job may use any device)
  int32_t devices[kMaxDevices];  // physical device indices, 0..kMaxDeviceIndex
  char job_name[kJobNameSize];   // NUL-terminated, NUL-padded
};

enum class RegisterStatus : uint32_t {
  ok = 0,           // registered; granted_class may be lower than requested (see message)
  bad_request = 1,  // the request was malformed (the daemon also closes the connection)
  unavailable = 2,  // the daemon cannot take the job now (see message); the shim retries later
};

struct RegisterReply {
  uint32_t status;         // RegisterStatus
  uint32_t granted_class;  // JobClass
  uint64_t job_id;         // also written in the control block
  char message[kMessageSize];
};

// Bits. redeclared: a live allocation declared again after a reconnect. swappable: managed
// memory the shim can move to host (docs/memory.md). reservation: declared BEFORE the allocation
// is made, under a shim-chosen token (kReservationTokenBit set) instead of a handle; the shim
// releases the token once the allocation is made (and committed under its real handle) or failed.
// committed: the real handle of an admitted reservation; never refused.
enum class MemDeclareFlags : uint32_t {
  none = 0,
  redeclared = 1,
  swappable = 2,
  reservation = 4,
  committed = 8,
};
inline constexpr uint32_t kMemDeclareKnownFlags = 15;
// Reservation tokens are never user-space addresses (which stay below 2^57).
inline constexpr uint64_t kReservationTokenBit = uint64_t{1} << 63;

struct MemDeclare {
  uint64_t handle;  // device pointer or VMM handle; unique per (job, device)
  uint64_t bytes;
  int32_t device;     // physical device index
  uint32_t kind;      // AllocKind, for display only
  uint32_t flags;  // MemDeclareFlags bits
  uint32_t site;   // allocation site id announced by an alloc_site message; 0: not traced
};

enum class MemStatus : uint32_t { admitted = 0, refused = 1 };

struct MemReply {
  uint32_t status;  // MemStatus
  uint32_t reserved;
};

struct MemRelease {
  uint64_t handle;
  int32_t device;
  uint32_t reserved;  // 0
};

// The physical memory of a device as the driver reports it: the default capacity is this less
// the configured reserve.
struct DeviceInfo {
  int32_t device;  // physical device index
  uint32_t reserved;  // 0
  uint64_t total_bytes;
};

// GPUSHARE_TRACE_ALLOC=1: where allocations come from, announced once per site and connection.
inline constexpr size_t kSiteTextSize = 240;
struct AllocSite {
  uint32_t site;  // non-zero, chosen by the shim
  uint32_t reserved;  // 0
  char text[kSiteTextSize];  // call stack, innermost first; NUL-terminated
};

// Asked once per process, before the driver initialises (it reads CUDA_MPS_* then). The answer is
// the daemon's: the class comes from its production rules applied to SO_PEERCRED and job_name,
// exactly as at registration; requested_class can only lower it.
struct MpsQuery {
  uint32_t requested_class;     // JobClass
  uint32_t reserved;            // 0
  char job_name[kJobNameSize];  // as in RegisterRequest
};

enum class MpsStatus : uint32_t {
  use_mps = 0,  // become a client of the MPS at pipe_directory with these settings
  no_mps = 1,   // run time-sliced: MPS is off, down, or serves another user (message says which)
};

inline constexpr size_t kMpsPipeDirectorySize = 128;  // MPS puts Unix sockets in it (108-byte paths)

struct MpsReply {
  uint32_t status;                    // MpsStatus
  uint32_t granted_class;             // JobClass, as registration would grant it now
  uint32_t client_priority;           // CUDA_MPS_CLIENT_PRIORITY: 0 production, 1 opportunistic
  uint32_t active_thread_percentage;  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE 1..100; 0: no limit
  char pipe_directory[kMpsPipeDirectorySize];  // CUDA_MPS_PIPE_DIRECTORY; "" unless use_mps
  char message[kMessageSize];                  // why, for the shim's log line
};

struct ErrorReply {
  uint32_t code;  // ErrorCode
  char message[kMessageSize];
};
#pragma pack(pop)

enum class ErrorCode : uint32_t { unsupported_version = 1, bad_frame = 2 };

static_assert(sizeof(FrameHeader) == 12);
static_assert(sizeof(RegisterRequest) == 12 + 4 * kMaxDevices + kJobNameSize);
static_assert(sizeof(RegisterReply) == 16 + kMessageSize);
static_assert(sizeof(MemDeclare) == 32);
static_assert(sizeof(MemReply) == 8);
static_assert(sizeof(MemRelease) == 16);
static_assert(sizeof(DeviceInfo) == 16);
static_assert(sizeof(AllocSite) == 8 + kSiteTextSize);
static_assert(sizeof(MpsQuery) == 8 + kJobNameSize);
static_assert(sizeof(MpsReply) == 16 + kMpsPipeDirectorySize + kMessageSize);

// What is wrong with a received frame, checked before its payload is looked at.
enum class FrameError {
  none,
  short_header,  // fewer bytes than a header
  bad_magic,
  bad_version,      // other than kWireVersion
  oversized,        // header.length > kMaxPayload
  length_mismatch,  // header.length disagrees with the bytes that arrived (a truncated frame)
  unknown_type,
  bad_size,  // a fixed-size message with the wrong payload size
};

inline const char* describe(FrameError e) {
  switch (e) {
    case FrameError::none:
      return "no error";
    case FrameError::short_header:
      return "frame shorter than its header";
    case FrameError::bad_magic:
      return "bad magic";
    case FrameError::bad_version:
      return "unsupported protocol version";
    case FrameError::oversized:
      return "payload length over the limit";
    case FrameError::length_mismatch:
      return "payload length disagrees with the frame (truncated?)";
    case FrameError::unknown_type:
      return "unknown message type";
    case FrameError::bad_size:
      return "wrong payload size for the message type";
  }
  return "?";
}

// The payload size a fixed-size message must have; 0 for variable-length (JSON) messages,
// SIZE_MAX for unknown types.
inline constexpr size_t expected_payload_size(MessageType t) {
  switch (t) {
    case MessageType::register_request:
      return sizeof(RegisterRequest);
    case MessageType::register_reply:
      return sizeof(RegisterReply);
    case MessageType::mem_declare:
      return sizeof(MemDeclare);
    case MessageType::mem_reply:
      return sizeof(MemReply);
    case MessageType::mem_release:
      return sizeof(MemRelease);
    case MessageType::device_info:
      return sizeof(DeviceInfo);
    case MessageType::alloc_site:
      return sizeof(AllocSite);
    case MessageType::mps_query:
      return sizeof(MpsQuery);
    case MessageType::mps_reply:
      return sizeof(MpsReply);
    case MessageType::error:
      return sizeof(ErrorReply);
    case MessageType::ctl_request:
    case MessageType::ctl_reply:
      return 0;
  }
  return SIZE_MAX;
}

// Checks a frame of `received` bytes (header included) as it came out of one recvmsg.
inline FrameError check_frame(const void* frame, size_t received, FrameHeader* header_out) {
  if (received < sizeof(FrameHeader)) return FrameError::short_header;
  FrameHeader h;
  std::memcpy(&h, frame, sizeof h);
  if (header_out) *header_out = h;
  if (h.magic != kWireMagic) return FrameError::bad_magic;
  if (h.version != kWireVersion) return FrameError::bad_version;
  if (h.length > kMaxPayload) return FrameError::oversized;
  if (h.length != received - sizeof(FrameHeader)) return FrameError::length_mismatch;
  size_t expected = expected_payload_size(static_cast<MessageType>(h.type));
  if (expected == SIZE_MAX) return FrameError::unknown_type;
  if (expected != 0 && h.length != expected) return FrameError::bad_size;
  return FrameError::none;
}

inline FrameHeader make_header(MessageType type, uint32_t length) {
  return FrameHeader{kWireMagic, kWireVersion, static_cast<uint16_t>(type), length};
}

// True when `field` holds a NUL within its size (a C string the receiver may print).
template <size_t N>
inline bool terminated(const char (&field)[N]) {
  return std::memchr(field, '\0', N) != nullptr;
}

// Copies a C string into a fixed field, truncating, always NUL-terminated and NUL-padded.
template <size_t N>
inline void copy_text(char (&field)[N], const char* text) {
  std::memset(field, 0, N);
  if (text) std::memcpy(field, text, strnlen(text, N - 1));
}

}  // namespace gpushare::protocol
