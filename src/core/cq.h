// A completion queue: a ring of ibv_wc filled by the transport, and a channel that gets one event
// per arming. Armed at creation; rpma_cq_wait re-arms after consuming an event, as verbs do.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <deque>
#include <mutex>

#include "core/compl_channel.h"

namespace rpma {

class Cq {
public:
    Cq(ComplChannel *channel, bool channel_shared) noexcept
        : channel_(channel), shared_(channel_shared) {}

    void push(const ibv_wc &wc);
    // rpma_cq_get_wc semantics: NO_COMPLETION when empty.
    int get_wc(int num_entries, ibv_wc *wc, int *got);
    // rpma_cq_wait: SHARED_CHANNEL if the channel is shared, NO_COMPLETION if non-blocking.
    int wait();
    void arm() noexcept { armed_.store(true); }
    bool empty() {
        std::lock_guard lk(mu_);
        return ring_.empty();
    }
    int fd() const noexcept { return channel_->fd(); }
    bool shared_channel() const noexcept { return shared_; }
    ComplChannel *channel() const noexcept { return channel_; }

private:
    ComplChannel *channel_;
    bool shared_;
    std::atomic<bool> armed_{true};
    std::mutex mu_;
    std::deque<ibv_wc> ring_;
};

}  // namespace rpma
