// The shm provider's byte stream: one RC stream over two rings in shared memory (segment.h),
// ours to write and the peer's to read, with an eventfd doorbell on each side. The RC engine
// above runs unchanged: it gets socket-like readv/writev and readiness on the doorbell fd.
//
// Nothing in the ring is trusted. Our own index lives here, not in the ring; the peer's index
// is read once per call and bounded (0 <= distance <= ring size) before use, and a bad one fails
// the call with EPROTO, which ends the connection (LOST). Bytes are only copied, never followed.
//
// Doorbells: a side about to sleep sets `sleeping` (input) or `waiting` (space) in the ring,
// then looks again; the other side, after publishing, clears the flag it finds set and writes
// the eventfd. So a busy pair makes no system calls, and no wake-up is lost. A thread that
// spins on its CQ asks only for a late doorbell (kBellIfIdle): the writer waits a couple of
// microseconds for the reader's index to move before it rings, so a spinner's own engine
// thread is not woken for every answer. A spinning engine asks for none until it stops
// (rc::ByteStream::Reader).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "provider/rc/byte_stream.h"
#include "provider/shm/segment.h"

namespace rpma::shm {

class ShmStream final : public rc::ByteStream {
  public:
    // wake_fd: our doorbell, the fd the engine watches; peer_fd: the peer's. Neither is owned.
    ShmStream(RingView out, RingView in, int wake_fd, int peer_fd) noexcept
        : out_(out), in_(in), wake_fd_(wake_fd), peer_fd_(peer_fd) {}

    ssize_t writev(const iovec *iov, int n) override;  // under the stream's tx lock
    ssize_t readv(const iovec *iov, int n) override;   // under its rx lock
    void shutdown(int how) override;
    uint32_t watch(uint32_t events) const noexcept override;
    uint32_t woken(uint32_t events) noexcept override;
    bool arm() noexcept override;
    // Input: absorbs stale doorbell counts, then arm(). Room: sets `waiting`, looks again. The
    // fd is our doorbell, for EPOLLIN whatever was wanted.
    Wait wait(uint32_t want) noexcept override;
    void yielded() noexcept override;
    void pass_wake() noexcept override;
    void reader(Reader r) noexcept override { reader_ = r; }
    uint32_t ready() noexcept override;
    bool await_input(std::chrono::microseconds limit) noexcept override;
    uint64_t progress() const noexcept override {
        return tail_.load(std::memory_order_relaxed) + sent_.load(std::memory_order_relaxed);
    }
    bool doorbell() const noexcept override { return true; }

    // The peer's process has gone (its control socket ended): what it wrote is still read,
    // then the stream ends; writes fail.
    void peer_gone() noexcept;
    // What the rings and the peer's doorbell belong to, kept alive as long as this stream.
    void keep(std::shared_ptr<const void> owner) noexcept { owner_ = std::move(owner); }

    // How long a write waits for a polling reader's index to move before it rings after all
    // (kBellIfIdle). Tests lengthen it so that their verdict does not depend on scheduling.
    static constexpr std::chrono::nanoseconds kLateBellGrace = std::chrono::microseconds(2);
    void late_bell_grace(std::chrono::nanoseconds g) noexcept { grace_ = g; }

  private:
    void ring_peer() noexcept;
    void notify_peer() noexcept;
    void publish_tail(uint64_t tail) noexcept;  // what we have read: the writer may refill it
    bool input_ready() const noexcept;
    // what a reader at EAGAIN asks the peer for
    uint32_t bell() const noexcept {
        return reader_ == Reader::kWaiter   ? kBell
               : reader_ == Reader::kPoller ? kBellIfIdle
                                            : kNoBell;
    }
    bool input_ended() const noexcept;

    RingView out_, in_;
    int wake_fd_, peer_fd_;
    uint64_t head_ = 0;  // out_: what we have written (the ring's copy is the peer's to read)
    // in_: what we have read. The reader (under the stream's rx lock) writes it; a waiter arms
    // the stream without that lock and reads it.
    std::atomic<uint64_t> tail_{0};
    std::atomic<bool> tx_blocked_{false};  // a write found the ring full: EPOLLOUT on wake-up
    std::atomic<uint64_t> sent_{0};        // head_ for other threads (progress)
    std::atomic<bool> gone_{false};
    std::atomic<bool> shut_rd_{false};
    bool shut_wr_ = false;
    Reader reader_ = Reader::kWaiter;  // under the rx lock, as the reads
    std::chrono::nanoseconds grace_ = kLateBellGrace;
    std::shared_ptr<const void> owner_;
};

}  // namespace rpma::shm
