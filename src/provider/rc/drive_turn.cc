// A waiter's turn in Progress::drive (drive_turn.h).
#include "provider/rc/drive_turn.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace rpma::rc {

int DriveTurn::fd() {
    std::call_once(
        made_, [this] { turn_.reset(::eventfd(0, EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC)); });
    return turn_.get();
}

void DriveTurn::signal(int waiters) noexcept {
    int f = turn_.get();  // made before any waiter counted itself (wait)
    // One unit per waiter counted (a semaphore): each sleeper takes its own, so none is woken
    // by another's and put back to sleep; a unit left over costs one more look.
    auto n = static_cast<uint64_t>(waiters);
    if (f >= 0) (void)!::write(f, &n, sizeof(n));
}

void DriveTurn::wait(Cq &cq, int channel_fd, const Task &completer, const CancelOff &off) {
    int turn = fd();
    if (turn < 0) {  // no descriptor to spare: the turn alone, as a sleeper's end decides it
        completer.wait_idle();
        return;
    }
    // Counted before the look at the completer, as let_go looks at the count after letting it
    // go, both by read-modify-writes of the count: either this look finds it free, or let_go
    // finds this waiter counted and signals. Uncounted on every way out, a cancellation's too.
    waiters_.fetch_add(1, std::memory_order_acq_rel);
    struct Uncount {
        std::atomic<int> &n;
        ~Uncount() { n.fetch_sub(1, std::memory_order_relaxed); }
    } uncount{waiters_};
    Task::State s = completer.state();
    if (s != Task::State::kIdle && s != Task::State::kStopped) {  // as wait_idle waits
        cq.arm();  // the owner's pushes into cq now fire its channel
        if (cq.empty()) {
            pollfd p[2] = {{channel_fd, POLLIN, 0}, {turn, POLLIN, 0}};
            int ready;
            {
                CancelOn on(off);          // holding nothing but the count
                ready = ::poll(p, 2, -1);  // EINTR: the caller looks and comes back
            }
            if (ready > 0 && (p[1].revents & POLLIN)) {
                uint64_t unit;
                (void)!::read(turn, &unit, sizeof(unit));  // this sleeper's own
            }
        }
    }
}

}  // namespace rpma::rc
