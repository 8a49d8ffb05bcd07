// Posted receives: an unordered set (SPEC), taken by incoming sends. A responder that finds it
// empty waits (infinite RNR retry) and is listed as a waiter; each post wakes the first one
// listed, so N waiting connections on an SRQ cost a post one wake-up, not N.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "provider/provider.h"

namespace rpma {

class Cq;

// One who waits for a receive: a responder that found its queue empty. It waits on one queue at a
// time, which keeps `listed` under its lock, so it is listed once however often it asks.
class RecvWaiter {
  public:
    virtual ~RecvWaiter() = default;
    // A receive was posted and this waiter is the one woken for it: it must ask again
    // (take_or_wait), or leave the queue. here: the caller is the poster, holding nothing, and
    // the waiter may ask on its thread; otherwise it must not.
    virtual void recv_posted(bool here) = 0;

    std::weak_ptr<RecvWaiter> ref;  // set by the owner before it first asks: whom to wake later
    bool listed = false;            // the queue's, under its lock
};

class RecvQueue final : public prov::SharedRecvQueue {
  public:
    explicit RecvQueue(uint32_t capacity) noexcept : capacity_(capacity) {}
    // RPMA_E_PROVIDER when full, as ibv_post_recv would fail.
    int post(prov::RecvWr r) override;
    // Takes one receive, or lists w to be woken by a later post (w.ref must be set).
    std::optional<prov::RecvWr> take_or_wait(RecvWaiter &w);
    // w waits no more (its connection closed or failed). A wake it was handed and will not use
    // goes to the next waiter: one more wake than needed is harmless, one lost leaves a receive
    // posted while a connection waits for one.
    void leave(RecvWaiter &w);
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
    std::atomic<std::size_t> held_{0};               // q_.size(), for holds_recv
    std::deque<std::weak_ptr<RecvWaiter>> waiters_;  // first listed, first woken

    // mu_ held: the first live waiter, taken off the list (its destructor must not run here)
    std::shared_ptr<RecvWaiter> next_waiter();
    void unlist(RecvWaiter &w);  // mu_ held, w listed
};

}  // namespace rpma
