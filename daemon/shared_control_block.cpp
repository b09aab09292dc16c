#include "shared_control_block.h"

#include <algorithm>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <utility>

#include "gpushare/protocol/futex.h"

namespace gpushare::daemon {

using protocol::ControlBlock;
using protocol::kControlBlockSize;

SharedControlBlock::SharedControlBlock(SharedControlBlock&& other) noexcept
    : memfd_(std::exchange(other.memfd_, -1)), block_(std::exchange(other.block_, nullptr)) {}

SharedControlBlock& SharedControlBlock::operator=(SharedControlBlock&& other) noexcept {
  if (this != &other) {
    this->~SharedControlBlock();
    memfd_ = std::exchange(other.memfd_, -1);
    block_ = std::exchange(other.block_, nullptr);
  }
  return *this;
}

SharedControlBlock::~SharedControlBlock() {
  close_memfd();
  if (block_) munmap(block_, kControlBlockSize);
  block_ = nullptr;
}

SharedControlBlock SharedControlBlock::create(uint64_t job_id, protocol::JobClass job_class,
                                              std::string* error) {
  SharedControlBlock b;
  // The name shows up in the shim's /proc/<pid>/maps as "/memfd:gpushare-control (deleted)".
  b.memfd_ = memfd_create("gpushare-control", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (b.memfd_ < 0) {
    *error = std::string("memfd_create: ") + std::strerror(errno);
    return {};
  }
  if (ftruncate(b.memfd_, kControlBlockSize) != 0 ||
      fcntl(b.memfd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    *error = std::string("sizing/sealing the control block: ") + std::strerror(errno);
    return {};
  }
  void* page = mmap(nullptr, kControlBlockSize, PROT_READ | PROT_WRITE, MAP_SHARED, b.memfd_, 0);
  if (page == MAP_FAILED) {
    *error = std::string("mmap: ") + std::strerror(errno);
    return {};
  }
  // The page is zero-filled; construct the block in place and open the gate.
  b.block_ = new (page) ControlBlock{};
  b.block_->magic = protocol::kControlBlockMagic;
  b.block_->version = protocol::kControlBlockVersion;
  b.block_->job_id = job_id;
  b.block_->allowance.store(protocol::kUnlimited, std::memory_order_relaxed);
  b.block_->paused.store(0, std::memory_order_relaxed);
  b.block_->job_class.store(static_cast<uint32_t>(job_class), std::memory_order_release);
  return b;
}

void SharedControlBlock::close_memfd() {
  if (memfd_ >= 0) ::close(memfd_);
  memfd_ = -1;
}

uint64_t SharedControlBlock::launches() const {
  return block_ ? block_->launches.load(std::memory_order_relaxed) : 0;
}

void SharedControlBlock::set_max_in_flight(uint32_t bound) {
  if (block_) block_->max_in_flight.store(bound, std::memory_order_relaxed);
}

std::optional<uint32_t> SharedControlBlock::in_flight() const {
  if (!block_ || block_->in_flight_tracked.load(std::memory_order_relaxed) != 1) return std::nullopt;
  constexpr uint32_t kMostInFlight = 1u << 20;  // more than any real queue; a scribble is clamped
  return std::min(block_->in_flight.load(std::memory_order_relaxed), kMostInFlight);
}

void SharedControlBlock::set_completion_stride(uint32_t stride) {
  if (block_) block_->completion_stride.store(stride, std::memory_order_relaxed);
}

std::optional<uint64_t> SharedControlBlock::completed_launches() const {
  if (!block_ || block_->completion_tracked.load(std::memory_order_relaxed) != 1)
    return std::nullopt;
  return block_->completed_launches.load(std::memory_order_relaxed);
}

uint64_t SharedControlBlock::gate_waits() const {
  return block_ ? block_->gate_waits.load(std::memory_order_relaxed) : 0;
}

protocol::JobClass SharedControlBlock::job_class() const {
  return block_ && block_->job_class.load(std::memory_order_relaxed) == 0
             ? protocol::JobClass::production
             : protocol::JobClass::opportunistic;
}

void SharedControlBlock::set_job_class(protocol::JobClass c) {
  if (!block_) return;
  block_->job_class.store(static_cast<uint32_t>(c), std::memory_order_release);
  wake();
}

void SharedControlBlock::set_gate(uint64_t allowance, bool paused) {
  if (!block_) return;
  block_->allowance.store(allowance, std::memory_order_release);
  // The memory broker's and the idle relay's pause bits are theirs (docs/memory.md,
  // docs/protocol.md): the policy never clears them.
  if (paused)
    block_->paused.fetch_or(protocol::kPausedByPolicy, std::memory_order_acq_rel);
  else
    block_->paused.fetch_and(~protocol::kPausedByPolicy, std::memory_order_acq_rel);
  wake();
}

uint64_t SharedControlBlock::last_mark_launch() const {
  return block_ ? block_->last_mark_launch.load(std::memory_order_acquire) : 0;
}

void SharedControlBlock::set_completion_poll_us(uint32_t us) {
  if (block_) block_->completion_poll_us.store(us, std::memory_order_relaxed);
}

void SharedControlBlock::set_paused_while_production_busy(bool paused) {
  if (!block_) return;
  if (paused) {
    // A launch that already passed the gate goes on; the next one waits. No wake-up needed.
    block_->paused.fetch_or(protocol::kPausedWhileProductionBusy, std::memory_order_acq_rel);
    return;
  }
  block_->paused.fetch_and(~protocol::kPausedWhileProductionBusy, std::memory_order_acq_rel);
  wake();
}

void SharedControlBlock::wake() {
  block_->gate_seq.fetch_add(1, std::memory_order_acq_rel);
  // A shared (not FUTEX_PRIVATE) wake: the waiters are in another process mapping the same memfd.
  protocol::futex_wake_all(&block_->gate_seq);
}

}  // namespace gpushare::daemon
