// The turn of the threads waiting on a connection's CQs (Progress::drive). One at a time sleeps
// there owning the completer: it reads the answers across its poll. Another waiter (on the
// connection's other CQ, or the same one) must not wait for that sleep to end, which only the
// sleeper's own CQ decides: it sleeps on its own CQ's channel, armed, since the sleeper's reads
// (and the engine's) produce its completions too, and on its turn, which comes when the
// completer is let go, so that it then reads in the sleeper's place.
#pragma once

#include <atomic>
#include <mutex>

#include "common/cancel.h"
#include "common/fd.h"
#include "provider/rc/task.h"
#include "provider/soft/cq.h"

namespace rpma::rc {

class DriveTurn {
  public:
    // Sleeps until cq's channel fires or the completer is let go (let_go); returns at once when
    // nobody runs it or cq holds completions. The caller (Cq::wait) then looks at cq again.
    // off: the caller's cancellation setting, back across the sleep (common/cancel.h).
    void wait(Cq &cq, int channel_fd, const Task &completer, const CancelOff &off);
    // The completer was let go: wakes the threads in wait.
    void let_go() noexcept {
        // A read-modify-write, as wait's count is: of the two, the later one sees the other
        // (the task let go before this one, or the count before wait's look at the task).
        if (int n = waiters_.fetch_add(0, std::memory_order_acq_rel); n > 0) signal(n);
    }

  private:
    void signal(int waiters) noexcept;
    int fd();  // made on first use, as few connections ever have a second waiter; -1: none

    std::atomic<int> waiters_{0};
    std::once_flag made_;
    Fd turn_;  // an eventfd, non-blocking
};

}  // namespace rpma::rc
