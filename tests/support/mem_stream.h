// An in-memory transport for the RC engine (provider/rc/byte_stream.h): the unit tests join
// two queue pairs with it, and the fuzz targets feed bytes through it, with no socket.
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <memory>
#include <mutex>

#include "provider/rc/byte_stream.h"

namespace rpma::rc::memio {

// One direction of an in-memory pipe, bounded so that a full pipe makes the writer wait (EAGAIN)
// as a full socket does.
struct Channel {
    std::mutex mu;
    std::deque<char> bytes;
    bool eof = false;
    size_t capacity = 256 * 1024;
    size_t largest_offer = 0;  // the most bytes one writev offered
};

// One end of a pipe: writes into `out`, reads from `in`.
class MemStream final : public ByteStream {
  public:
    MemStream(std::shared_ptr<Channel> in, std::shared_ptr<Channel> out)
        : in_(std::move(in)), out_(std::move(out)) {}
    ssize_t writev(const iovec *iov, int n) override {
        std::lock_guard lk(out_->mu);
        if (out_->eof) {
            errno = EPIPE;
            return -1;
        }
        size_t offer = 0;
        for (int i = 0; i < n; ++i) offer += iov[i].iov_len;
        out_->largest_offer = std::max(out_->largest_offer, offer);
        size_t room = out_->capacity - out_->bytes.size(), put = 0;
        for (int i = 0; i < n && room > 0; ++i) {
            size_t k = std::min(room, iov[i].iov_len);
            auto *p = static_cast<const char *>(iov[i].iov_base);
            out_->bytes.insert(out_->bytes.end(), p, p + k);
            room -= k;
            put += k;
        }
        if (put == 0) {
            errno = EAGAIN;
            return -1;
        }
        return static_cast<ssize_t>(put);
    }
    ssize_t readv(const iovec *iov, int n) override {
        std::lock_guard lk(in_->mu);
        size_t got = 0;
        for (int i = 0; i < n && !in_->bytes.empty(); ++i) {
            size_t k = std::min(in_->bytes.size(), iov[i].iov_len);
            std::copy_n(in_->bytes.begin(), k, static_cast<char *>(iov[i].iov_base));
            in_->bytes.erase(in_->bytes.begin(), in_->bytes.begin() + static_cast<long>(k));
            got += k;
        }
        if (got > 0) return static_cast<ssize_t>(got);
        if (in_->eof) return 0;
        errno = EAGAIN;
        return -1;
    }
    void shutdown(int how) override {
        {
            std::lock_guard lk(out_->mu);
            out_->eof = true;
        }
        if (how == SHUT_RDWR) {
            std::lock_guard lk(in_->mu);
            in_->eof = true;
        }
    }
    // No fd to poll: a waiter can only be told whether input (or the end) is there already.
    // Room to write counts only where the pipe is below its capacity.
    Wait wait(uint32_t want) noexcept override {
        Wait w;
        w.cheap = true;
        if (want & EPOLLIN) {
            std::lock_guard lk(in_->mu);
            w.ready = !in_->bytes.empty() || in_->eof;
        }
        if ((want & EPOLLOUT) && !w.ready) {
            std::lock_guard lk(out_->mu);
            w.ready = out_->bytes.size() < out_->capacity || out_->eof;
        }
        return w;
    }

  private:
    std::shared_ptr<Channel> in_, out_;
};

}  // namespace rpma::rc::memio
