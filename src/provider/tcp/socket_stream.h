// The tcp provider's byte stream: a non-blocking TCP socket under the RC engine.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include "common/fd.h"
#include "provider/rc/byte_stream.h"

namespace rpma::tcp {

// A stream over the queue pair's socket (the Fd stays the Stream's, for the engine's epoll).
class SocketStream final : public rc::ByteStream {
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
    // The socket's own readiness, level-triggered: it polls ready at once for what is there.
    Wait wait(uint32_t want) noexcept override { return Wait{fd_->get(), want, false, false}; }
    int take_error() noexcept override {
        int err = 0;
        socklen_t len = sizeof(err);
        if (!fd_->valid() || ::getsockopt(fd_->get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            return 0;
        return err;
    }

  private:
    const Fd *fd_;
};

}  // namespace rpma::tcp
