// Posted receives: an unordered set (SPEC), taken by incoming sends. A responder that finds it
// empty waits (infinite RNR retry) and registers as a waiter to be resumed by the next post.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "provider/provider.h"

namespace rpma {

class Cq;

class RecvWaiter {
  public:
    virtual ~RecvWaiter() = default;
    virtual void recv_posted() = 0;
};

class RecvQueue final : public prov::SharedRecvQueue {
  public:
    explicit RecvQueue(uint32_t capacity) noexcept : capacity_(capacity) {}
    // RPMA_E_PROVIDER when full, as ibv_post_recv would fail.
    int post(prov::RecvWr r) override;
    // Takes one receive, or registers w to be told when one is posted.
    std::optional<prov::RecvWr> take_or_wait(std::weak_ptr<RecvWaiter> w);
    std::deque<prov::RecvWr> drain();
    // A receive is posted (a poller of its RCQ serves the peer's requests then).
    bool holds_recv() {
        std::lock_guard lk(mu_);
        return !q_.empty();
    }

  private:
    uint32_t capacity_;
    std::mutex mu_;
    std::deque<prov::RecvWr> q_;
    std::vector<std::weak_ptr<RecvWaiter>> waiters_;
};

}  // namespace rpma
