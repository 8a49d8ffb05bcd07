// The transport seam under the RC engine: a non-blocking, reliable, ordered byte stream. The
// requester, responder and completer move frames only through it, so they run the same over a
// TCP socket (SocketStream) and over an in-memory pipe in the unit tests. Calls follow the
// socket conventions: -1 with errno (EAGAIN when it would block), 0 from a read at the end.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "common/fd.h"

namespace rpma::tcp {

class ByteStream {
  public:
    virtual ~ByteStream() = default;
    virtual ssize_t writev(const iovec *iov, int n) = 0;  // gathers; may take part of it
    virtual ssize_t readv(const iovec *iov, int n) = 0;   // scatters
    virtual void shutdown(int how) = 0;                   // SHUT_WR or SHUT_RDWR
};

// A stream over the queue pair's socket (the Fd stays the Stream's, for the engine's epoll).
class SocketStream final : public ByteStream {
  public:
    explicit SocketStream(const Fd *fd) noexcept : fd_(fd) {}
    ssize_t writev(const iovec *iov, int n) override {
        msghdr msg{};
        msg.msg_iov = const_cast<iovec *>(iov);
        msg.msg_iovlen = static_cast<size_t>(n);
        return ::sendmsg(fd_->get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    ssize_t readv(const iovec *iov, int n) override {
        msghdr msg{};
        msg.msg_iov = const_cast<iovec *>(iov);
        msg.msg_iovlen = static_cast<size_t>(n);
        return ::recvmsg(fd_->get(), &msg, MSG_DONTWAIT);
    }
    void shutdown(int how) override {
        if (fd_->valid()) ::shutdown(fd_->get(), how);
    }

  private:
    const Fd *fd_;
};

}  // namespace rpma::tcp
