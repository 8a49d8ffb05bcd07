// A completion queue: a ring of ibv_wc filled by the transport, and a channel that gets one event
// per arming: armed at creation, the first completion added while armed writes one event and
// disarms it; rpma_cq_wait re-arms after consuming an event, as verbs do (ibv_req_notify_cq).
// The CQ is passive: an empty get_wc and a wait call one progress hook (as libfabric's tcp CQ
// read drives progress()), which runs its producer on the calling thread, saving the hop
// through the engine thread. The hook keeps the CQ disarmed while it pushes; a get_wc whose
// pass pushed while the CQ was armed writes that one event itself, so a thread asleep on the
// channel's fd wakes whichever thread pushed; a wait's own pass writes none (the waiter would
// consume it).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>

#include "provider/provider.h"
#include "provider/soft/compl_channel.h"

namespace rpma {

class Cq;

// The producer of a CQ's completions, run by the thread that polls or waits on it.
class ProgressHook {
  public:
    virtual ~ProgressHook() = default;
    // Processes the input that is ready now. With wait, first sleeps until the channel fd or the
    // hook's own input is ready; the hook arms cq just before it sleeps and disarms it once
    // awake, so only other threads' pushes write the channel. Without wait, it disarms cq
    // while it pushes and arms it again if it was armed (Cq::get_wc then writes the event).
    // A hook disarms cq only while it holds what the hook needs to run; a thread asleep in the
    // hook without it is woken when it is let go, so none is left deaf.
    virtual void progress(Cq &cq, bool wait, int channel_fd) = 0;
};

class Cq final : public prov::CompletionQueue {
  public:
    Cq(ComplChannel *channel, bool channel_shared) noexcept
        : channel_(channel), shared_(channel_shared) {}

    void push(const ibv_wc &wc);
    // rpma_cq_get_wc semantics: NO_COMPLETION when empty (after one progress pass).
    int get_wc(int num_entries, ibv_wc *wc, int *got) override;
    // rpma_cq_wait: SHARED_CHANNEL if the channel is shared, NO_COMPLETION if non-blocking.
    int wait() override;
    void arm() noexcept override { armed_.store(true); }
    // Pushes stop writing the channel; returns whether the CQ was armed.
    bool disarm() noexcept { return armed_.exchange(false); }
    bool empty() override {
        std::lock_guard lk(mu_);
        return ring_.empty();
    }
    int fd() const noexcept override { return channel_->fd(); }
    void set_hook(ProgressHook *h) noexcept { hook_.store(h, std::memory_order_release); }
    ProgressHook *hook() const noexcept { return hook_.load(std::memory_order_acquire); }

  private:
    ComplChannel *channel_;
    bool shared_;
    std::atomic<ProgressHook *> hook_{nullptr};
    std::atomic<bool> armed_{true};
    std::mutex mu_;
    std::deque<ibv_wc> ring_;
    uint64_t silent_ = 0;  // pushes that found the CQ disarmed, so wrote no event
};

}  // namespace rpma
