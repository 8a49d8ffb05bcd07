// The connection's state as RDMA CM sees it (docs/rc-rebuild.md, section 2): set-up, established,
// an orderly close, done; whether our Disconnect is asked for and queued; the set-up, linger and
// last-answers deadlines; the peer's QP number and private data; the event queue. The queue pair
// (queue_pair.h) holds one and does the work each transition calls for: the call that makes a
// transition returns true, so of two threads that find the connection lost, one reports it.
//
// Locks: mu_ only, taken briefly and by no call that waits; its rank is the queue pair's.
#pragma once

#include <librpma.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "common/fd_queue.h"
#include "common/ranked_mutex.h"
#include "provider/soft/engine.h"

namespace rpma::rc {

class Connection {
  public:
    // kClosing: deleted while established; the engine finishes the orderly close (our
    // Disconnect out, the peer's input drained) without touching the application's objects.
    enum class Cm { kIdle, kConnecting, kAwaitReply, kEstablished, kClosing, kDone };
    // What a post finds: a connection not set up yet (an error), one that takes it, or one
    // closing, closed or disconnected by us (the post is flushed).
    enum class Posts { kNotYet, kOpen, kFlushed };
    // What is due at a timer: the linger of a close ran out, the peer ended its requests but
    // not its answers for too long (set_answers_due), or the set-up timed out.
    enum class Due { kNothing, kLingerOver, kAnswersOverdue, kSetupTimedOut };

    // lock_rank: mu_'s place in the queue pair's lock order
    Connection(FdQueue<rpma_conn_event> *events, unsigned lock_rank) noexcept
        : events_(events), mu_(lock_rank) {}

    Cm state();
    bool established();
    Posts posts();

    // Set-up: the client connects (kConnecting, then kAwaitReply once its streams are up) and
    // takes the server's reply; the server accepts. The deadline is the set-up's.
    void begin_connect(Clock::time_point deadline);
    bool await_reply(Clock::time_point deadline);  // true: was kConnecting
    bool take_reply();                             // true: was kAwaitReply, now established
    void accept();
    // before ESTABLISHED is queued; read after it
    void set_peer(uint32_t qp, std::vector<uint8_t> pdata);
    const uint32_t &remote_qp() const noexcept { return remote_qp_; }
    const std::vector<uint8_t> &remote_pdata() const noexcept { return remote_pdata_; }

    // Tear-down. close() ran: closed() from now on, and an established connection closes in
    // order until deadline (true; kClosing), any other is done.
    bool begin_close(Clock::time_point deadline);
    bool closed() const noexcept { return closed_.load(); }
    bool mark_failed();  // the set-up failed: true unless already done
    bool mark_lost();    // true unless done or closing (an orderly close ends on its own)
    // What rpma_conn_disconnect does: nothing (asked for already, or closed), send our
    // Disconnect (established), or end the set-up (connecting: rdma_disconnect puts the QP in
    // error, so the server's reply can no longer establish it).
    enum class Disconnect { kNothing, kSend, kEndSetup };
    Disconnect request_disconnect();
    // The peer's Disconnect came on a stream. The first one is answered with ours, as a DREP
    // would be (answer() runs under mu_, so no close or loss comes between); the call that
    // finds both_in() ends the connection and returns true.
    template <class Answer, class BothIn>
    bool peer_disconnect(Answer &&answer, BothIn &&both_in) {
        std::lock_guard lk(mu_);
        if (cm_ != Cm::kEstablished) return false;
        if (!disc_sent_) {
            disc_sent_ = true;
            answer();
        }
        if (!both_in()) return false;
        cm_ = Cm::kDone;
        return true;
    }
    // Engine thread: true once, for the caller that queues our Disconnect frames.
    bool take_disconnect() noexcept { return !std::exchange(disc_queued_, true); }

    // The peer ended its requests' stream: its answers' must end by due. true: the first.
    bool set_answers_due(Clock::time_point due);
    Due due(Clock::time_point now);

    void post(rpma_conn_event ev) { events_->push(ev); }

  private:
    FdQueue<rpma_conn_event> *events_;
    std::atomic<bool> closed_{false};  // engine-thread work must not touch the CQs
    bool disc_queued_ = false;         // engine thread only

    RankedMutex mu_;
    Cm cm_ = Cm::kIdle;                // under mu_, as everything below but the peer's
    bool disc_sent_ = false;           // ours is asked for: posts are flushed from now on
    Clock::time_point deadline_{};     // set-up or linger
    Clock::time_point answers_due_{};  // {}: not set

    uint32_t remote_qp_ = 0;
    std::vector<uint8_t> remote_pdata_;
};

}  // namespace rpma::rc
