// The Hello a client sends first on each of its two streams (wire.h), read from a non-blocking
// socket as it arrives: exactly the Hello's bytes, since what follows belongs to the
// connection, then checked (magic, version, role, private data length). The listener keeps one
// per accepted socket until it is complete.
#pragma once

#include <cstddef>

#include "provider/tcp/wire.h"

namespace rpma::tcp {

class HelloReader {
  public:
    enum class Step {
        kMore,  // not all of it yet: read again on the next input
        kBad,   // end of stream, a socket error or a malformed Hello: close the socket
        kDone,  // hello() is complete and well formed
    };
    Step read(int fd);
    const Hello &hello() const noexcept { return hello_; }
    bool main() const noexcept { return hello_.role == static_cast<uint8_t>(StreamRole::kMain); }

  private:
    Hello hello_{};
    size_t got_ = 0;
};

}  // namespace rpma::tcp
