#include "provider/shm/shm_stream.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace rpma::shm {

namespace {
// A large copy publishes its index this often, so the other side works on the ring meanwhile.
constexpr uint64_t kPublishEvery = 64 * 1024;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Spins until done() or about `limit` has passed; true if done. The clock is read only every
// 64 looks: most waits end before the first read.
template <class Done>
bool spin_for(std::chrono::nanoseconds limit, Done done) noexcept {
    std::chrono::steady_clock::time_point until{};
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            if (done()) return true;
            cpu_relax();
        }
        auto now = std::chrono::steady_clock::now();
        if (until == std::chrono::steady_clock::time_point{})
            until = now + limit;
        else if (now >= until)
            return false;
    }
}

void ring(int fd) noexcept {
    uint64_t one = 1;
    ssize_t r = ::write(fd, &one, sizeof(one));
    (void)r;  // an eventfd takes 2^64-2 rings before it would block
}

// Takes every ring so far off a (non-blocking) eventfd.
void drain(int fd) noexcept {
    uint64_t v;
    ssize_t r = ::read(fd, &v, sizeof(v));
    (void)r;  // EAGAIN: nothing rang
}
}  // namespace

void ShmStream::ring_peer() noexcept {
    ring(peer_fd_);
}

// After publishing our head: ring the peer if it asked. A peer thread that spins on the ring
// (kBellIfIdle) is seen alive when its tail moves, usually within a microsecond, and then
// needs no doorbell: it reads on, and one that leaves looks again and rings itself if input
// is left (yielded, the engine's spin_end). If the tail does not move within the grace, the
// reader may have stopped, and the doorbell goes after all.
void ShmStream::notify_peer() noexcept {
    RingCtl *c = out_.ctl;
    uint32_t want = c->sleeping.load();  // seq_cst: after the head's store
    if (want == kNoBell) return;
    if (want == kBellIfIdle) {
        uint64_t seen = c->tail.load(std::memory_order_acquire);
        bool alive = spin_for(grace_, [&] {
            uint64_t t = c->tail.load(std::memory_order_acquire);
            return t != seen || t == head_;  // it reads
        });
        if (alive) return;
    }
    if (c->sleeping.exchange(kNoBell) != kNoBell) ring_peer();
}

ssize_t ShmStream::writev(const iovec *iov, int n) {
    if (shut_wr_ || gone_.load(std::memory_order_relaxed)) {
        errno = EPIPE;
        return -1;
    }
    RingCtl *c = out_.ctl;
    uint64_t used = head_ - c->tail.load(std::memory_order_acquire);
    if (used > out_.size) {
        errno = EPROTO;  // the peer claims to have read what we never wrote
        return -1;
    }
    if (used == out_.size) {
        c->waiting.store(1);  // seq_cst: ordered before the second look at the tail
        used = head_ - c->tail.load();
        if (used > out_.size) {
            errno = EPROTO;
            return -1;
        }
        if (used == out_.size) {
            tx_blocked_.store(true, std::memory_order_relaxed);
            errno = EAGAIN;
            return -1;
        }
    }
    uint64_t room = out_.size - used, done = 0, published = 0;
    for (int i = 0; i < n && done < room; ++i) {
        const char *src = static_cast<const char *>(iov[i].iov_base);
        uint64_t len = std::min<uint64_t>(iov[i].iov_len, room - done);
        while (len) {
            uint64_t at = (head_ + done) & (out_.size - 1);
            uint64_t chunk = std::min({len, out_.size - at, kPublishEvery});
            std::memcpy(out_.data + at, src, chunk);
            src += chunk;
            len -= chunk;
            done += chunk;
            if (done - published >= kPublishEvery && done < room) {
                // a large write: the reader starts on what is there while we copy the rest
                published = done;
                c->head.store(head_ + done);
                if (c->sleeping.load() == kBell && c->sleeping.exchange(kNoBell)) ring_peer();
            }
        }
    }
    head_ += done;
    sent_.store(head_, std::memory_order_relaxed);
    c->head.store(head_);  // seq_cst: ordered before the look at `sleeping`
    notify_peer();
    return static_cast<ssize_t>(done);
}

void ShmStream::publish_tail(uint64_t tail) noexcept {
    tail_.store(tail, std::memory_order_relaxed);
    RingCtl *c = in_.ctl;
    c->tail.store(tail);  // seq_cst: ordered before the look at `waiting`
    if (c->waiting.load() && c->waiting.exchange(0)) ring_peer();
}

bool ShmStream::input_ended() const noexcept {
    return gone_.load(std::memory_order_acquire) || in_.ctl->closed.load(std::memory_order_acquire);
}

ssize_t ShmStream::readv(const iovec *iov, int n) {
    if (shut_rd_.load(std::memory_order_relaxed)) return 0;
    RingCtl *c = in_.ctl;
    uint64_t tail = tail_.load(std::memory_order_relaxed);  // ours: only the reader writes it
    uint64_t avail = c->head.load(std::memory_order_acquire) - tail;
    if (avail == 0) {
        bool ended = input_ended();
        // Ask for a doorbell even when a spinning poller reads, as it may stop at any time and
        // then only the engine thread reads on; for a poller only if it falls behind; none
        // for a spinning engine, which arms the stream as it stops.
        if (!ended) c->sleeping.store(bell());
        avail = c->head.load() - tail;  // after `closed` or the flag
        if (avail == 0) {
            if (ended) return 0;
            errno = EAGAIN;
            return -1;
        }
    }
    if (avail > in_.size) {
        errno = EPROTO;  // the peer claims more than the ring holds
        return -1;
    }
    uint64_t done = 0, published = 0;
    for (int i = 0; i < n && done < avail; ++i) {
        char *dst = static_cast<char *>(iov[i].iov_base);
        uint64_t len = std::min<uint64_t>(iov[i].iov_len, avail - done);
        while (len) {
            uint64_t at = (tail + done) & (in_.size - 1);
            uint64_t chunk = std::min({len, in_.size - at, kPublishEvery});
            std::memcpy(dst, in_.data + at, chunk);
            dst += chunk;
            len -= chunk;
            done += chunk;
            if (done - published >= kPublishEvery && done < avail) {
                // a large read: the writer refills what we took while we copy the rest
                published = done;
                publish_tail(tail + done);
            }
        }
    }
    publish_tail(tail + done);
    return static_cast<ssize_t>(done);
}

void ShmStream::shutdown(int how) {
    if (!shut_wr_) {
        shut_wr_ = true;
        out_.ctl->closed.store(1, std::memory_order_release);
        ring_peer();
    }
    if (how == SHUT_RDWR) {
        shut_rd_.store(true, std::memory_order_relaxed);
        ring(wake_fd_);  // our engine sees the end, as after a socket's shutdown
    }
}

uint32_t ShmStream::watch(uint32_t events) const noexcept {
    // The doorbell is the only readiness there is: input, space and the peer's end (shutdown
    // always rings) all come through it; the end of the peer's process comes through the
    // control socket (tcp::QueuePair::on_events).
    return events & (EPOLLIN | EPOLLOUT | EPOLLRDHUP) ? uint32_t{EPOLLIN} : 0u;
}

uint32_t ShmStream::woken(uint32_t) noexcept {
    // Not drained: the engine's registration is edge-triggered (every ring is an edge), and a
    // thread that sleeps on the fd absorbs the stale count first (wait), so a ring the engine
    // sees still wakes a thread asleep on it.
    uint32_t ev = EPOLLIN;
    if (tx_blocked_.exchange(false, std::memory_order_relaxed)) ev |= EPOLLOUT;
    if (input_ended() || shut_rd_.load(std::memory_order_relaxed)) ev |= EPOLLRDHUP;
    return ev;
}

bool ShmStream::input_ready() const noexcept {
    return in_.ctl->head.load() != tail_.load(std::memory_order_relaxed) || input_ended() ||
           shut_rd_.load(std::memory_order_relaxed);
}

bool ShmStream::await_input(std::chrono::microseconds limit) noexcept {
    // While we look, the writer need not ring (nor wait to see us read); whoever calls this arms
    // the stream again if nothing came (drive's arm, yielded after the read).
    in_.ctl->sleeping.store(kNoBell);
    return spin_for(limit, [&] { return input_ready(); });
}

uint32_t ShmStream::ready() noexcept {
    uint32_t ev = input_ready() ? uint32_t{EPOLLIN} : 0u;
    // the reader clears `waiting` as it frees room (a hostile one may lie: the write then
    // finds the ring full again and stops again)
    if (tx_blocked_.load(std::memory_order_relaxed) && out_.ctl->waiting.load() == 0 &&
        tx_blocked_.exchange(false, std::memory_order_relaxed))
        ev |= EPOLLOUT;
    return ev;
}

bool ShmStream::arm() noexcept {
    in_.ctl->sleeping.store(kBell);
    return input_ready();  // after the flag: what came before it is seen here
}

rc::Stream::Wait ShmStream::wait(uint32_t want) noexcept {
    Wait w{wake_fd_, EPOLLIN, false, true};
    if (want & (EPOLLIN | EPOLLRDHUP)) {
        // Rings from before this look are stale: what they announced is seen by arm()'s look,
        // so the fd polls ready only for what comes after it. Not while a write is stopped on a
        // full ring: a ring may then mean room, which woken() reports as EPOLLOUT.
        if (!tx_blocked_.load(std::memory_order_relaxed)) drain(wake_fd_);
        w.ready = arm();
    }
    if (want & EPOLLOUT) {
        RingCtl *c = out_.ctl;
        c->waiting.store(1);  // seq_cst: ordered before the look at the tail
        // A tail out of bounds (a hostile peer) is ready too: the write says EPROTO.
        uint64_t used = sent_.load(std::memory_order_relaxed) - c->tail.load();
        if (used != out_.size) w.ready = true;
    }
    return w;
}

void ShmStream::yielded() noexcept {
    // The reader leaves the stream until its next wake-up (it may stop short of EAGAIN): ask
    // for a doorbell, and ring our own if input is left, as level-triggered epoll would. A
    // spinning engine looks again by itself.
    in_.ctl->sleeping.store(bell());
    if (reader_ != Reader::kSpinner &&
        in_.ctl->head.load() != tail_.load(std::memory_order_relaxed))
        ring(wake_fd_);
}

void ShmStream::pass_wake() noexcept {
    ring(wake_fd_);
}

void ShmStream::peer_gone() noexcept {
    gone_.store(true, std::memory_order_release);
    ring(wake_fd_);
}

}  // namespace rpma::shm
