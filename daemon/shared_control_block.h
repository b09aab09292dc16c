// The daemon's side of one client's control block (protocol/control_block.h): created here as a
// sealed memfd, handed to the shim with SCM_RIGHTS, and mapped until the client goes away.
//
// The shim writes the counters and may scribble anything over the page: the daemon only reads
// counters (and compares them with its previous sample) and only writes the gate fields. The
// memfd is sealed against shrinking, so a client cannot make the daemon's mapping fault (SIGBUS).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gpushare/protocol/control_block.h"

namespace gpushare::daemon {

class SharedControlBlock {
 public:
  SharedControlBlock() = default;
  SharedControlBlock(SharedControlBlock&& other) noexcept;
  SharedControlBlock& operator=(SharedControlBlock&& other) noexcept;
  SharedControlBlock(const SharedControlBlock&) = delete;
  SharedControlBlock& operator=(const SharedControlBlock&) = delete;
  ~SharedControlBlock();

  // A new block, initialised with an open gate. On failure returns an empty block and sets `error`.
  static SharedControlBlock create(uint64_t job_id, protocol::JobClass job_class,
                                   std::string* error);

  bool valid() const { return block_ != nullptr; }
  // The memfd to pass to the shim; close_memfd() once it has been sent (the mapping stays).
  int memfd() const { return memfd_; }
  void close_memfd();

  uint64_t launches() const;
  uint64_t gate_waits() const;
  protocol::JobClass job_class() const;
  // Writes the gate fields, then bumps gate_seq and wakes every launch sleeping on it.
  void set_job_class(protocol::JobClass c);
  void set_gate(uint64_t allowance, bool paused);
  // The in-flight bound (0: none); read by the shim at its next launch, no wake-up needed.
  void set_max_in_flight(uint32_t bound);
  // The shim's count of its launches not known complete, when it tracks them; clamped (the value
  // comes from the client).
  std::optional<uint32_t> in_flight() const;
  // The completion stride (a power of two; 0: no completion marks), read by the shim's poller.
  void set_completion_stride(uint32_t stride);
  // The launch number of the shim's latest completed mark, when it tracks completions; the caller
  // clamps it against launches() (the value comes from the client).
  std::optional<uint64_t> completed_launches() const;
  // The launch number of the shim's latest recorded completion mark (untrusted).
  uint64_t last_mark_launch() const;
  // How often the shim's poller looks at pending marks, in µs (0: its default).
  void set_completion_poll_us(uint32_t us);
  // Sets or clears kPausedWhileProductionBusy (the idle relay's bit; the others are left alone)
  // and wakes the job's launches when it clears.
  void set_paused_while_production_busy(bool paused);
  // The mapped page, for the memory broker's fields (daemon/memory_swap.cpp); null when empty.
  protocol::ControlBlock* page() const { return block_; }

 private:
  void wake();
  int memfd_ = -1;
  protocol::ControlBlock* block_ = nullptr;
};

}  // namespace gpushare::daemon
