#include "provider/soft/cq.h"

#include <librpma.h>

#include <algorithm>
#include <cstdint>

namespace rpma {

void Cq::push(const ibv_wc &wc) {
    bool fire;
    {
        std::lock_guard lk(mu_);
        ring_.push_back(wc);
        fire = armed_.exchange(false);
        if (!fire) silent_++;
    }
    if (fire) channel_->notify(this);
}

int Cq::get_wc(int num_entries, ibv_wc *wc, int *got) {
    std::unique_lock lk(mu_);
    bool fire = false;
    if (ProgressHook *h = ring_.empty() ? hook() : nullptr) {
        uint64_t silent = silent_;
        lk.unlock();
        h->progress(*this, false, -1);
        lk.lock();
        // The pass kept the CQ disarmed while it pushed, then put back what it found. Armed
        // again, with pushes since that wrote no event: the event verbs would have written for
        // the first of them, so a thread asleep on the channel's fd wakes; the CQ is disarmed.
        fire = silent_ != silent && armed_.exchange(false);
    }
    int n = std::min<int>(num_entries, static_cast<int>(ring_.size()));
    std::copy_n(ring_.begin(), n, wc);
    ring_.erase(ring_.begin(), ring_.begin() + n);
    lk.unlock();
    if (fire) channel_->notify(this);
    if (n == 0) return RPMA_E_NO_COMPLETION;
    if (got) *got = n;
    return 0;
}

int Cq::wait() {
    if (shared_) return RPMA_E_SHARED_CHANNEL;
    if (!channel_->nonblocking()) {
        // The hook sleeps on the channel and its own input; it returns after each pass, and
        // whatever its pass produced (or an event another thread's push fired) ends the wait.
        bool hooked = false;
        while (ProgressHook *h = hook()) {
            hooked = true;
            if (channel_->try_wait() || !empty()) {
                arm();
                return 0;
            }
            h->progress(*this, true, channel_->fd());
        }
        // The hook went (its queue pair closed): the channel alone. Armed first, so that a push
        // made while the hook had the CQ disarmed is not missed.
        if (hooked) {
            arm();
            if (!empty()) return 0;
        }
    }
    prov::CompletionQueue *fired = channel_->wait();
    if (!fired) return RPMA_E_NO_COMPLETION;
    fired->arm();
    return 0;
}

}  // namespace rpma
