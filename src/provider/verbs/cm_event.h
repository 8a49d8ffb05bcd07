// rdma_get_cm_event for a caller that holds a lock with cancellation off (take_when_readable):
// librdmacm drops some events and reads again (a request it could not set up, a close after a
// failed connect), which on a blocking channel would sleep there, cancellation off and the lock
// held. The read is made non-blocking for that one call and the channel's mode put back.
#pragma once

#include <rdma/rdma_cma.h>

#include <cerrno>

#include "common/fd.h"

namespace rpma::verbs {

// 0, or -1 with errno (EAGAIN: nothing after all, an event dropped by librdmacm).
inline int get_cm_event_now(rdma_event_channel *ch, rdma_cm_event **ev) {
    bool flip = set_nonblocking(ch->fd, true);
    int ret = rdma_get_cm_event(ch, ev);
    int err = errno;
    if (flip) set_nonblocking(ch->fd, false);
    errno = err;
    return ret;
}

}  // namespace rpma::verbs
