// A connected pair of non-blocking unix stream sockets for tests: ours (the side under test) and
// the peer's.
#pragma once

#include <sys/socket.h>

#include "common/fd.h"

namespace rpma::test {

inline bool socket_pair(Fd *ours, Fd *peer) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return false;
    ours->reset(sv[0]);
    peer->reset(sv[1]);
    return true;
}

}  // namespace rpma::test
