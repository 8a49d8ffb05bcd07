// A completion queue: a ring of ibv_wc filled by the transport, and a channel that gets one event
// per arming. Armed at creation; rpma_cq_wait re-arms after consuming an event, as verbs do.
// A thread waiting on (or polling) a CQ fed by one queue pair drives that queue pair itself
// (CqDriver), saving the hop through the engine thread.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <deque>
#include <mutex>

#include "provider/provider.h"
#include "provider/soft/compl_channel.h"

namespace rpma {

// A source of completions that a thread waiting on the CQ can drive itself, saving the hop
// through the engine thread. Set only when one queue pair feeds the CQ.
class CqDriver {
  public:
    virtual ~CqDriver() = default;
    // Waits until the channel fd or the driver's own input is ready, and processes that input.
    virtual void drive(int channel_fd) = 0;
    // Processes whatever input is ready now, without waiting (a polling caller): the answers to
    // its own requests, and with `requests` the peer's requests too.
    virtual void poll_once(bool requests) = 0;
};

class Cq final : public prov::CompletionQueue {
  public:
    Cq(ComplChannel *channel, bool channel_shared) noexcept
        : channel_(channel), shared_(channel_shared) {}

    void push(const ibv_wc &wc);
    // rpma_cq_get_wc semantics: NO_COMPLETION when empty.
    int get_wc(int num_entries, ibv_wc *wc, int *got) override;
    // rpma_cq_wait: SHARED_CHANNEL if the channel is shared, NO_COMPLETION if non-blocking.
    int wait() override;
    void arm() noexcept override { armed_.store(true); }
    bool empty() override {
        std::lock_guard lk(mu_);
        return ring_.empty();
    }
    int fd() const noexcept override { return channel_->fd(); }
    void set_driver(CqDriver *d) noexcept { driver_ = d; }
    CqDriver *driver() const noexcept { return driver_; }
    // The calling thread is inside drive() for this CQ: completions it pushes need no wake-up.
    static thread_local Cq *t_driving;

  private:
    ComplChannel *channel_;
    bool shared_;
    CqDriver *driver_ = nullptr;
    std::atomic<bool> armed_{true};
    // get_wc calls in a row that found the ring empty: the first (the end of a drain after a
    // wait) reads only the answers; a thread that keeps polling serves the peer's requests too.
    std::atomic<uint32_t> empty_polls_{0};
    // wait() returned what this thread read while driving: the get_wc that drains those ends
    // on the empty ring without reading again (the read just found the socket empty; what
    // came since is read by the next wait, at once). A poller that never waits is unaffected.
    std::atomic<bool> after_drive_{false};
    std::mutex mu_;
    std::deque<ibv_wc> ring_;
};

}  // namespace rpma
