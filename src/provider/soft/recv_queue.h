// Posted receives: an unordered set (SPEC), taken by incoming sends. A responder that finds it
// empty waits (infinite RNR retry) and registers as a waiter to be resumed by the next post.
#pragma once

#include <atomic>
#include <cstddef>
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
    // A receive is posted (a poller of its RCQ serves the peer's requests then). Lock-free, as
    // every empty poll asks: post, take and drain store the count under mu_. An answer may be
    // stale when used (it was under the lock too, once unlocked), and that is harmless: a stale
    // true costs one read of the peer's requests that completes nothing; a stale false leaves
    // a request to the engine, which serves it whenever the poller does not, or the next poll.
    bool holds_recv() const noexcept { return held_.load(std::memory_order_relaxed) != 0; }

  private:
    uint32_t capacity_;
    std::mutex mu_;
    std::deque<prov::RecvWr> q_;
    std::atomic<std::size_t> held_{0};  // q_.size(), for holds_recv
    std::vector<std::weak_ptr<RecvWaiter>> waiters_;
};

}  // namespace rpma
