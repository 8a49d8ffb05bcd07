// A queue whose readiness is an eventfd: one counter unit per queued item, so the fd can be handed
// to the application for poll/epoll, and a blocking or non-blocking pop follows the fd's own
// O_NONBLOCK flag, which the application may set.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

#include "common/cancel.h"
#include "common/fd.h"

namespace rpma {

template <class T>
class FdQueue {
  public:
    FdQueue() : fd_(::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC)) {}

    bool valid() const noexcept { return fd_.valid(); }
    int fd() const noexcept { return fd_.get(); }

    void push(T item) {
        {
            std::lock_guard lk(mu_);
            items_.push_back(std::move(item));
        }
        uint64_t one = 1;
        while (::write(fd_.get(), &one, sizeof(one)) < 0 && errno == EINTR) {
        }
    }

    // Takes one item; blocks unless the fd is non-blocking. nullopt: nothing ready (or error).
    // A cancelled caller takes nothing (take_when_readable).
    std::optional<T> pop() {
        return take_when_readable(fd_.get(), mu_, std::optional<T>{},
                                  [this] { return take_locked(); });
    }

    // Takes one item only if one is ready, whatever the fd's blocking mode. An empty queue
    // costs no system call (a waiter checks it before every sleep); an item pushed meanwhile
    // makes the fd readable, which that sleep watches.
    std::optional<T> try_pop() {
        CancelOff off;
        std::lock_guard lk(mu_);
        if (items_.empty() || !readable_now(fd_.get())) return std::nullopt;
        return take_locked();
    }

    bool nonblocking() const noexcept { return rpma::nonblocking(fd_.get()); }

    // Takes every item without touching the counter's blocking mode (used at teardown).
    std::deque<T> drain() {
        std::lock_guard lk(mu_);
        std::deque<T> out;
        out.swap(items_);
        return out;
    }

  private:
    // One unit and its item, with mu_ held and cancellation off. An item is pushed before its
    // unit is written, so a unit read has its item (drain() alone leaves units without one).
    std::optional<T> take_locked() {
        uint64_t v;
        for (;;) {
            ssize_t r = ::read(fd_.get(), &v, sizeof(v));
            if (r == sizeof(v)) break;
            if (r < 0 && errno == EINTR) continue;
            return std::nullopt;
        }
        if (items_.empty()) return std::nullopt;
        T item = std::move(items_.front());
        items_.pop_front();
        return item;
    }

    Fd fd_;
    std::mutex mu_;
    std::deque<T> items_;
};

}  // namespace rpma
