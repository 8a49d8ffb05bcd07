#include "provider/soft/recv_queue.h"

#include <librpma.h>

#include "common/log.h"

namespace rpma {

int RecvQueue::post(prov::RecvWr r) {
    r.hold();  // kept past the post
    std::vector<std::weak_ptr<RecvWaiter>> wake;
    {
        std::lock_guard lk(mu_);
        if (q_.size() >= capacity_) {
            RPMA_LOG_ERROR("receive queue full (%u entries)", capacity_);
            return RPMA_E_PROVIDER;
        }
        q_.push_back(std::move(r));
        held_.store(q_.size(), std::memory_order_relaxed);
        wake.swap(waiters_);
    }
    for (auto &w : wake)
        if (auto p = w.lock()) p->recv_posted();
    return 0;
}

std::optional<prov::RecvWr> RecvQueue::take_or_wait(std::weak_ptr<RecvWaiter> w) {
    std::lock_guard lk(mu_);
    if (q_.empty()) {
        waiters_.push_back(std::move(w));
        return std::nullopt;
    }
    prov::RecvWr r = std::move(q_.front());
    q_.pop_front();
    held_.store(q_.size(), std::memory_order_relaxed);
    return r;
}

std::deque<prov::RecvWr> RecvQueue::drain() {
    std::lock_guard lk(mu_);
    std::deque<prov::RecvWr> out;
    out.swap(q_);
    held_.store(0, std::memory_order_relaxed);
    return out;
}

}  // namespace rpma
