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
    std::optional<T> pop() {
        uint64_t v;
        for (;;) {
            ssize_t r = ::read(fd_.get(), &v, sizeof(v));
            if (r == sizeof(v)) break;
            if (r < 0 && errno == EINTR) continue;
            return std::nullopt;
        }
        std::lock_guard lk(mu_);
        if (items_.empty()) return std::nullopt;  // cannot happen: one unit per item
        T item = std::move(items_.front());
        items_.pop_front();
        return item;
    }

    // Takes one item only if one is ready, whatever the fd's blocking mode. An empty queue
    // costs no system call (a waiter checks it before every sleep); an item pushed meanwhile
    // makes the fd readable, which that sleep watches.
    std::optional<T> try_pop() {
        {
            std::lock_guard lk(mu_);
            if (items_.empty()) return std::nullopt;
        }
        if (!readable_now(fd_.get())) return std::nullopt;
        return pop();
    }

    bool nonblocking() const noexcept {
        int fl = ::fcntl(fd_.get(), F_GETFL);
        return fl >= 0 && (fl & O_NONBLOCK);
    }

    // Takes every item without touching the counter's blocking mode (used at teardown).
    std::deque<T> drain() {
        std::lock_guard lk(mu_);
        std::deque<T> out;
        out.swap(items_);
        return out;
    }

  private:
    Fd fd_;
    std::mutex mu_;
    std::deque<T> items_;
};

}  // namespace rpma
