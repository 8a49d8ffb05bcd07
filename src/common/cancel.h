// Thread cancellation (pthread_cancel(3)) across the library's calls. A call turns it off while
// it works (CancelOff, api::guarded), since its cancellation points (socket I/O, a wait for the
// engine thread, an eventfd write) lie between steps that must not be cut apart. A blocking call
// (rpma_cq_wait, rpma_conn_wait, rpma_conn_next_event, rpma_ep_next_conn_req) leaves the
// caller's setting in place across its wait, where it holds nothing or a guard puts back what it
// holds (Progress::drive), and turns it off around the rest (CancelOff, CancelOn). A wait that
// takes something (an event, a queue's unit) sleeps in a poll and takes it with cancellation off
// (take_when_readable, common/fd.h). So a program can cancel a thread blocked there, as with
// upstream, and no other call is cut short, nor anything lost.
#pragma once

#include <pthread.h>

namespace rpma {

class CancelOff {
  public:
    CancelOff() noexcept { ::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &prev_); }
    ~CancelOff() { ::pthread_setcancelstate(prev_, nullptr); }
    CancelOff(const CancelOff &) = delete;
    CancelOff &operator=(const CancelOff &) = delete;
    int prev() const noexcept { return prev_; }

  private:
    int prev_ = PTHREAD_CANCEL_DISABLE;
};

// Across one blocking wait inside a CancelOff: the caller's own setting back.
class CancelOn {
  public:
    explicit CancelOn(const CancelOff &off) noexcept {
        ::pthread_setcancelstate(off.prev(), nullptr);
    }
    ~CancelOn() { ::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr); }
    CancelOn(const CancelOn &) = delete;
    CancelOn &operator=(const CancelOn &) = delete;
};

}  // namespace rpma
