#include "provider/soft/recv_queue.h"

#include <librpma.h>

#include <algorithm>

#include "common/log.h"

namespace rpma {

int RecvQueue::post(prov::RecvWr r) {
    r.hold();  // kept past the post
    std::shared_ptr<RecvWaiter> wake;
    {
        std::lock_guard lk(mu_);
        if (q_.size() >= capacity_) {
            RPMA_LOG_ERROR("receive queue full (%u entries)", capacity_);
            return RPMA_E_PROVIDER;
        }
        q_.push_back(std::move(r));
        held_.store(q_.size(), std::memory_order_relaxed);
        wake = next_waiter();
    }
    if (wake) wake->recv_posted(true);
    return 0;
}

std::optional<prov::RecvWr> RecvQueue::take_or_wait(RecvWaiter &w) {
    std::lock_guard lk(mu_);
    if (q_.empty()) {
        if (!w.listed) {
            w.listed = true;
            waiters_.push_back(w.ref);
        }
        return std::nullopt;
    }
    // Listed, yet here before its wake (another resume re-ran its request): it waits no more.
    if (w.listed) unlist(w);
    prov::RecvWr r = std::move(q_.front());
    q_.pop_front();
    held_.store(q_.size(), std::memory_order_relaxed);
    return r;
}

void RecvQueue::leave(RecvWaiter &w) {
    std::shared_ptr<RecvWaiter> wake;
    {
        std::lock_guard lk(mu_);
        if (w.listed) unlist(w);
        if (!q_.empty()) wake = next_waiter();
    }
    if (wake) wake->recv_posted(false);
}

std::shared_ptr<RecvWaiter> RecvQueue::next_waiter() {
    while (!waiters_.empty()) {
        std::shared_ptr<RecvWaiter> w = waiters_.front().lock();
        waiters_.pop_front();
        if (w) {
            w->listed = false;
            return w;
        }
    }
    return nullptr;
}

void RecvQueue::unlist(RecvWaiter &w) {
    w.listed = false;
    // the same owner, even where the waiter is a part of it (an aliasing reference)
    auto same = [&w](const std::weak_ptr<RecvWaiter> &e) {
        return !e.owner_before(w.ref) && !w.ref.owner_before(e);
    };
    auto it = std::find_if(waiters_.begin(), waiters_.end(), same);
    if (it != waiters_.end()) waiters_.erase(it);
}

std::deque<prov::RecvWr> RecvQueue::drain() {
    std::lock_guard lk(mu_);
    std::deque<prov::RecvWr> out;
    out.swap(q_);
    held_.store(0, std::memory_order_relaxed);
    return out;
}

}  // namespace rpma
