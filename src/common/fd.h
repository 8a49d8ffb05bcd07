// Owning file descriptor.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <utility>

#include "common/cancel.h"

namespace rpma {

class Fd {
  public:
    Fd() = default;
    explicit Fd(int fd) noexcept : fd_(fd) {}
    Fd(Fd &&o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Fd &operator=(Fd &&o) noexcept {
        if (this != &o) reset(std::exchange(o.fd_, -1));
        return *this;
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd() { reset(); }

    int get() const noexcept { return fd_; }
    bool valid() const noexcept { return fd_ >= 0; }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

  private:
    int fd_ = -1;
};

// Whether fd has input now (a zero-timeout poll): a wait on it would not block. Not noexcept:
// poll is a cancellation point, and a cancelled caller's unwind must pass (common/cancel.h).
inline bool readable_now(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// Whether fd is in non-blocking mode (an application may set it on an fd the library hands out).
inline bool nonblocking(int fd) noexcept {
    int fl = ::fcntl(fd, F_GETFL);
    return fl >= 0 && (fl & O_NONBLOCK);
}

// Puts fd in non-blocking mode (on) or out of it, its other flags kept; true if that changed it.
inline bool set_nonblocking(int fd, bool on) noexcept {
    int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ((fl & O_NONBLOCK) != 0) == on) return false;
    return ::fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) == 0;
}

// A blocking take from fd that pthread_cancel(3) cannot cut in half: the sleep is a poll, which
// takes nothing, and take() runs with cancellation off, under mu, only once fd reports something,
// so no other taker empties fd first. A blocking read as the sleep could be cancelled after it
// had taken its data (glibc 2.36 turns asynchronous cancellation on around the call), losing it:
// a verbs event never acknowledged (ibv_destroy_cq and rdma_destroy_id then wait for ever), a
// queue's unit gone. take() must not block on an fd with input (a read that drops what it read
// and reads again must be made non-blocking). Returns take()'s result, or none when fd is
// non-blocking and has nothing (or poll fails). The blocking mode is read on every pass, since
// the application may switch it.
template <class R, class Take>
R take_when_readable(int fd, std::mutex &mu, R none, Take take) {
    for (;;) {
        const bool sleep = !nonblocking(fd);
        pollfd p{fd, POLLIN, 0};
        if (sleep && ::poll(&p, 1, -1) < 0 && errno == EINTR) continue;  // the cancellation point
        CancelOff off;
        std::lock_guard lk(mu);
        int n = ::poll(&p, 1, 0);
        if (n > 0) return take();  // an error or hang-up counts too: take() meets and reports it
        if (n < 0 || !sleep) return none;
    }
}

}  // namespace rpma
