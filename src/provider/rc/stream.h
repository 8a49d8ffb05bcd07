// The stream under the rebuilt RC engine (docs/rc-rebuild.md, section 2): a non-blocking,
// reliable, ordered byte stream, and one way to wait for it. Calls follow the socket
// conventions: -1 with errno (EAGAIN when it would block), 0 from a read at the end.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>

namespace rpma::rc {

class Stream {
  public:
    virtual ~Stream() = default;
    virtual ssize_t writev(const iovec *iov, int n) = 0;  // gathers; may take part of it
    virtual ssize_t readv(const iovec *iov, int n) = 0;   // scatters
    virtual void shutdown(int how) = 0;                   // SHUT_WR or SHUT_RDWR

    // What a thread about to sleep on a stream polls, and whether it need sleep at all.
    struct Wait {
        int fd = -1;          // poll this (-1: the stream has no fd)
        uint32_t events = 0;  // for these (EPOLLIN, EPOLLOUT)
        bool ready = false;   // what was wanted is there already: do not sleep, read or write
        bool cheap = false;   // a read that finds nothing costs no system call (spinning pays)
    };
    // "I am about to sleep for `want`" (EPOLLIN and/or EPOLLOUT). After it, whatever the peer
    // does that `want` asks for makes `fd` poll ready. A socket returns its own fd and `want`
    // (its readiness is level-triggered: it polls ready at once for what is there already, so
    // `ready` stays false and costs no system call); a doorbell stream asks the peer for a
    // doorbell, looks again and says `ready` if what it wants came meanwhile.
    virtual Wait wait(uint32_t want) noexcept = 0;
};

}  // namespace rpma::rc
