// The transmit side of both streams: posts handed to the requester (requester.h) and
// receives, frames queued under Stream::mu in a TxQueue (tx_queue.h), what becomes of one whose
// region vanished, and the engine's interest in room to send.
#include <sys/socket.h>

#include "common/log.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/queue_pair.h"

namespace rpma::rc {

int QueuePair::post_send(prov::SendWr &&wr) {
    // In a forked child the sockets are the parent's: a frame from here would corrupt its stream.
    if (int ret = engine_->check_process("the connection")) return ret;
    std::unique_lock lk(sq_mu_);
    Connection::Posts posts = conn_.posts();
    if (posts == Connection::Posts::kNotYet) {
        RPMA_LOG_ERROR("the connection is not established yet");
        return RPMA_E_PROVIDER;
    }
    bool open = posts == Connection::Posts::kOpen;
    std::optional<TxItem> item;
    int ret = requester_.post(std::move(wr), open, responder_.executed(), item);
    if (!item) return ret;
    Stream &s = req();
    bool run;
    {
        std::lock_guard tlk(s.mu);
        // Frames already queued mean the socket is full (EPOLLOUT schedules the requester), or
        // they wait for an answer as below, or the post that queued them has yet to schedule
        // the requester: this one joins them (and goes out in the same sendmsg).
        run = s.tx.empty();
        // Many requests in flight and one whose answer will come has left (the send queue holds
        // a contiguous range of sequence numbers): the thread that reads that answer completes
        // it under sq_mu_, after this push, and then runs the requester (finish_read), which
        // sends this frame with every other posted by then in one sendmsg. Exact: whoever
        // reads that answer runs the requester after it, so the frame never waits longer.
        if (run && sq_.outstanding() >= kCorkDepth && sq_.front().seq <= s.tx.answer_due())
            run = false;
        s.tx.push(std::move(*item));
    }
    // Queued in sequence order (under sq_mu_); the send needs only s.mu, so the completer can
    // take sq_mu_ for the answers that arrive meanwhile instead of sleeping.
    lk.unlock();
    // Idle: this thread sends now. Running elsewhere: armed, and that runner's next pass sends
    // this frame, never waiting for an answer. A broken stream was shut down (flush_tx): the
    // engine sees its end and reports the loss.
    if (run) run_requester();
    return 0;
}

int QueuePair::post_recv(prov::RecvWr &&r) {
    if (int ret = engine_->check_process("the connection")) return ret;
    if (cfg_.srq) {
        RPMA_LOG_ERROR("the connection receives through a shared RQ; use rpma_srq_recv");
        return RPMA_E_PROVIDER;
    }
    bool err;
    {
        std::lock_guard lk(sq_mu_);
        err = completer_.error();
    }
    if (err) {
        responder_.flush_recv(r);
        return 0;
    }
    return rq_.post(std::move(r));
}

void QueuePair::update_mask(Stream &s) {
    if (!s.key) return;
    uint32_t m = 0;
    bool taken = s.sleeper.load() != Stream::Sleeper::kEngine;  // a thread reads it
    if (s.rx_on) m |= s.stalled || taken ? EPOLLRDHUP : EPOLLIN | EPOLLRDHUP;
    // A doorbell is all of a shm stream's readiness: while a thread has it, the engine leaves it
    // to that thread, unless it waits for room itself (the end of the peer's process still
    // comes through the control socket: tcp::QueuePair::other_events).
    if (taken && s.io->doorbell()) m &= ~uint32_t{EPOLLRDHUP};
    if (s.want_out) m |= EPOLLOUT;
    // Edge-triggered (docs/rc-rebuild.md, f4): an event schedules the stream's task, whose
    // runner reads until the stream blocks, wherever it runs. A change here makes epoll look at
    // the stream again, so what is there already is reported once more.
    engine_->modify(s.fd.get(), s.key, s.io->watch(m) | EPOLLET);
}

bool QueuePair::region_vanished(Stream &s, TxItem &it) {
    bool started = s.tx.started(it);
    if (is_request(it.hdr.op)) {
        // the requester marks it and rewrites the frame, or says why the stream must end
        if (const char *why = requester_.source_vanished(it, started, s.why)) {
            s.why = why;
            return false;
        }
    } else if (!started && it.hdr.op == static_cast<uint8_t>(Op::kReadResp)) {
        // A read whose source was deregistered before its answer began fails as an access
        // error; the responder then enters the error state.
        it.hdr.op = static_cast<uint8_t>(Op::kNak);
        it.hdr.status = static_cast<uint16_t>(NakStatus::kAccess);
        it.hdr.length = 0;
        it.len = 0;
        it.data = nullptr;
        s.nak_queued = true;
    } else {
        // Half an answer is out: only ending the connection keeps the peer from using it.
        RPMA_LOG_ERROR("a region was deregistered while the peer read it");
        s.why = "a region was deregistered under a read answer in progress";
        return false;
    }
    s.tx.drop_region(it);
    return true;
}

bool QueuePair::source_faulted(uint64_t seq) {
    if (!requester_.has_faults()) return false;
    std::lock_guard lk(req().mu);
    return requester_.take_fault(seq);
}

bool QueuePair::flush_tx(Stream &s) {
    for (;;) {
        switch (s.tx.send(*s.io)) {
            case TxQueue::Sent::kDead:
                if (region_vanished(s, s.tx.dead())) continue;
                // the engine sees the end of the stream even when an application thread's post
                // found this
                s.io->shutdown(SHUT_RDWR);
                return false;
            case TxQueue::Sent::kBlocked:
                if (!s.want_out) {
                    s.want_out = true;
                    update_mask(s);
                }
                return true;
            case TxQueue::Sent::kError:
                s.peer_end = ended_by_peer(-1, s.tx.error());
                s.why = strerror(s.tx.error());
                // as above: a socket shows its error to the engine by itself, a shm ring's bad
                // index (EPROTO) does not
                s.io->shutdown(SHUT_RDWR);
                return false;
            case TxQueue::Sent::kAll:
                break;
        }
        break;
    }
    if (s.want_out) {
        s.want_out = false;
        update_mask(s);
    }
    return true;
}

bool QueuePair::run_requester() {
    if (!requester_task_.schedule()) return true;  // armed: its runner sends again
    Stream &s = req();
    bool ok = true;
    run_passes(requester_task_, [&] {
        std::lock_guard lk(s.mu);
        ok = flush_tx(s) && ok;  // an empty queue costs no system call
        return true;
    });
    return ok;
}

void QueuePair::append_ack(Stream &s) {
    uint64_t seq = responder_.take_ack();
    // ACKs are cumulative: one still waiting in the queue is raised instead of adding another,
    // so a peer that does not read its answers cannot grow the queue with them.
    TxItem *last = s.tx.unsent_back();
    if (last && last->hdr.op == static_cast<uint8_t>(Op::kAck)) {
        last->hdr.aux = seq;
        return;
    }
    FrameHeader a{};
    a.op = static_cast<uint8_t>(Op::kAck);
    a.aux = seq;
    s.tx.push(TxItem{a, nullptr, 0, nullptr});
}

bool QueuePair::answer_now() {
    Stream &s = resp();
    std::lock_guard lk(s.mu);
    if (responder_.ack_owed()) append_ack(s);
    return s.tx.empty() || flush_tx(s);
}

bool QueuePair::queue_answer(const FrameHeader &h, const char *data, std::shared_ptr<Region> region,
                             bool batch) {
    Stream &s = resp();
    std::lock_guard lk(s.mu);
    responder_.answered(h.aux);
    s.tx.push(TxItem{h, data, h.length, std::move(region)});
    return (batch && s.tx.size() < kAnswersPerSend) || flush_tx(s);
}

bool QueuePair::answers_block(const Stream &s, bool modifies) noexcept {
    return s.tx.size() >= kMaxQueuedAnswers || (modifies && s.tx.data_items() > 0);
}

bool QueuePair::take_drained(Stream &s) noexcept {
    if (!s.drain_wait || answers_block(s, true)) return false;
    s.drain_wait = false;
    return true;
}

QueuePair::Step QueuePair::wait_for_answers(bool modifies) {
    Stream &s = resp();
    {
        std::lock_guard lk(s.mu);  // the engine may be sending answers (EPOLLOUT)
        if (!answers_block(s, modifies)) return Step::kContinue;
    }
    if (!answer_now()) return Step::kFatal;
    std::lock_guard lk(s.mu);
    if (!answers_block(s, modifies)) return Step::kContinue;
    // Flow control instead of copies: the request stays staged until EPOLLOUT drains the
    // answers (on_events), and meanwhile nothing more is read from this peer.
    s.drain_wait = true;
    if (!s.want_out) {
        s.want_out = true;
        update_mask(s);
    }
    return Step::kStall;
}

}  // namespace rpma::rc
