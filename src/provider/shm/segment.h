// The shared memory of one shm connection: a sealed memfd holding four byte rings, two per RC
// stream (one each way). The client creates it; the server maps it only after checking the
// seals and the size, so the peer can neither shrink it under us (SIGBUS) nor grow it. Every
// byte of it stays writable by the peer: nothing read from it is trusted (shm_stream.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/fd.h"

namespace rpma::shm {

// A ring's control block. Each index has one writer; the other side only reads it and bounds it
// before use.
struct RingCtl {
    alignas(64) std::atomic<uint64_t> head;  // bytes the producer has written
    alignas(64) std::atomic<uint64_t> tail;  // bytes the consumer has read
    // The consumer wants a doorbell for input: kNoBell, kBell, or kBellIfIdle (a thread spins on
    // this ring: ring only if what was written is not taken within a short grace).
    alignas(64) std::atomic<uint32_t> sleeping;
    std::atomic<uint32_t> waiting;  // the producer wants one for space
    std::atomic<uint32_t> closed;   // the producer wrote its last byte
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
enum : uint32_t { kNoBell = 0, kBell = 1, kBellIfIdle = 2 };

struct RingView {
    RingCtl *ctl = nullptr;
    char *data = nullptr;
    uint64_t size = 0;  // a power of two
};

// Which ring: the RC stream (main, join) and the direction.
enum class RingId { kMainToServer = 0, kMainToClient = 1, kJoinToServer = 2, kJoinToClient = 3 };

class Segment {
  public:
    static constexpr uint32_t kMinRing = 4096;
    static constexpr uint32_t kMaxRing = 16u << 20;
    static constexpr size_t kCtlSpace = 4096;  // a page per control block: no false sharing

    Segment() = default;
    Segment(const Segment &) = delete;
    Segment &operator=(const Segment &) = delete;
    ~Segment();

    // The client's: a new sealed memfd for rings of ring_size bytes. False with *why set.
    bool create(uint32_t ring_size, std::string *why);
    // The server's: maps the client's memfd after checking seals and size.
    bool attach(Fd fd, uint32_t ring_size, std::string *why);

    static bool valid_ring_size(uint32_t n) noexcept {
        return n >= kMinRing && n <= kMaxRing && (n & (n - 1)) == 0;
    }
    static size_t bytes_for(uint32_t ring_size) noexcept {
        return 4 * (kCtlSpace + static_cast<size_t>(ring_size));
    }

    int fd() const noexcept { return fd_.get(); }
    // The mapping keeps the memory: once the client has sent the fd (and the server mapped it)
    // it is one descriptor per connection held for nothing.
    void close_fd() noexcept { fd_.reset(); }
    uint32_t ring_size() const noexcept { return ring_size_; }
    RingView ring(RingId id) const noexcept;

  private:
    bool map(std::string *why);

    Fd fd_;
    void *base_ = nullptr;
    size_t len_ = 0;
    uint32_t ring_size_ = 0;
};

}  // namespace rpma::shm
