// The transport seam under the RC engine: a non-blocking, reliable, ordered byte stream. The
// requester, responder and completer move frames only through it, so they run the same over a
// TCP socket (tcp/socket_stream.h) and over an in-memory pipe in the unit tests. Calls follow the
// socket conventions: -1 with errno (EAGAIN when it would block), 0 from a read at the end.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

namespace rpma::rc {

class ByteStream {
  public:
    virtual ~ByteStream() = default;
    virtual ssize_t writev(const iovec *iov, int n) = 0;  // gathers; may take part of it
    virtual ssize_t readv(const iovec *iov, int n) = 0;   // scatters
    virtual void shutdown(int how) = 0;                   // SHUT_WR or SHUT_RDWR
};

}  // namespace rpma::rc
