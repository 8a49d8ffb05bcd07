#include "provider/soft/cq.h"

#include <librpma.h>

#include <algorithm>

namespace rpma {

thread_local Cq *Cq::t_driving = nullptr;

void Cq::push(const ibv_wc &wc) {
    {
        std::lock_guard lk(mu_);
        ring_.push_back(wc);
    }
    if (t_driving == this) return;  // the waiter is this thread; it looks at the ring next
    if (armed_.exchange(false)) channel_->notify(this);
}

int Cq::get_wc(int num_entries, ibv_wc *wc, int *got) {
    if (driver_ && empty() && !after_drive_.exchange(false, std::memory_order_relaxed)) {
        // A poller spinning on an empty CQ reads the answers itself instead of waiting for the
        // engine thread to be scheduled.
        bool again = empty_polls_.fetch_add(1, std::memory_order_relaxed) > 0;
        t_driving = this;
        driver_->poll_once(again);
        t_driving = nullptr;
    }
    std::lock_guard lk(mu_);
    if (ring_.empty()) return RPMA_E_NO_COMPLETION;
    empty_polls_.store(0, std::memory_order_relaxed);
    int n = std::min<int>(num_entries, static_cast<int>(ring_.size()));
    std::copy_n(ring_.begin(), n, wc);
    ring_.erase(ring_.begin(), ring_.begin() + n);
    if (got) *got = n;
    return 0;
}

int Cq::wait() {
    if (shared_) return RPMA_E_SHARED_CHANNEL;
    after_drive_.store(false, std::memory_order_relaxed);
    if (driver_ && !channel_->nonblocking()) {
        for (bool drove = false;; drove = true) {
            if (prov::CompletionQueue *fired = channel_->try_wait()) {
                fired->arm();
                return 0;
            }
            if (!empty()) {  // completions this thread produced while driving
                after_drive_.store(drove, std::memory_order_relaxed);
                return 0;
            }
            t_driving = this;
            driver_->drive(channel_->fd());
            t_driving = nullptr;
        }
    }
    prov::CompletionQueue *fired = channel_->wait();
    if (!fired) return RPMA_E_NO_COMPLETION;
    fired->arm();
    return 0;
}

}  // namespace rpma
