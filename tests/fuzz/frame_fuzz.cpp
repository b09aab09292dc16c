// Fuzzes what gpushared does with one received datagram before any state is touched: the frame
// check (protocol/wire.h), then the payload decoding of server.cpp's handle_frame (a memcpy into
// the packed struct the type names, the NUL checks on its text fields) and the ctl request's JSON
// parse (server.cpp's on_ctl). Every input must be either refused with a FrameError or
// decoded without reading past the datagram.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "gpushare/protocol/wire.h"

namespace protocol = gpushare::protocol;

namespace {

template <typename Message>
Message decode(const uint8_t* payload) {
  Message m;
  std::memcpy(&m, payload, sizeof m);
  return m;
}

// Keeps the compiler from dropping a decoded field.
volatile size_t sink;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size heap copy, as recvmsg leaves it: ASan reports any read past the datagram.
  std::vector<uint8_t> frame(data, data + size);
  protocol::FrameHeader h{};
  protocol::FrameError e = protocol::check_frame(frame.data(), frame.size(), &h);
  sink = std::strlen(protocol::describe(e));
  if (e != protocol::FrameError::none) return 0;
  const uint8_t* payload = frame.data() + sizeof h;
  using protocol::MessageType;
  switch (static_cast<MessageType>(h.type)) {
    case MessageType::register_request: {
      auto r = decode<protocol::RegisterRequest>(payload);
      sink = protocol::terminated(r.job_name) ? std::strlen(r.job_name) : 0;
      break;
    }
    case MessageType::mem_declare:
      sink = decode<protocol::MemDeclare>(payload).bytes;
      break;
    case MessageType::mem_release:
      sink = decode<protocol::MemRelease>(payload).handle;
      break;
    case MessageType::device_info:
      sink = decode<protocol::DeviceInfo>(payload).total_bytes;
      break;
    case MessageType::alloc_site: {
      auto a = decode<protocol::AllocSite>(payload);
      sink = protocol::terminated(a.text) ? std::strlen(a.text) : 0;
      break;
    }
    case MessageType::mps_query: {
      auto q = decode<protocol::MpsQuery>(payload);
      sink = protocol::terminated(q.job_name) ? std::strlen(q.job_name) : 0;
      break;
    }
    case MessageType::ctl_request:
    case MessageType::ctl_reply: {
      auto json = nlohmann::json::parse(payload, payload + h.length, nullptr,
                                        /*allow_exceptions=*/false);
      sink = json.is_discarded()
                 ? 0
                 : json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
      break;
    }
    case MessageType::register_reply: {
      auto r = decode<protocol::RegisterReply>(payload);
      sink = protocol::terminated(r.message) ? std::strlen(r.message) : 0;
      break;
    }
    case MessageType::mps_reply: {
      auto r = decode<protocol::MpsReply>(payload);
      sink = protocol::terminated(r.pipe_directory) ? std::strlen(r.pipe_directory) : 0;
      break;
    }
    case MessageType::error: {
      auto r = decode<protocol::ErrorReply>(payload);
      sink = protocol::terminated(r.message) ? std::strlen(r.message) : 0;
      break;
    }
    case MessageType::mem_reply:
      sink = decode<protocol::MemReply>(payload).status;
      break;
    case MessageType::device_uuids:
      sink = decode<protocol::DeviceUuids>(payload).count;
      break;
    case MessageType::device_map:
      sink = decode<protocol::DeviceMap>(payload).count;
      break;
  }
  return 0;
}
