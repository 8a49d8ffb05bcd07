// The transmit side of both streams: frames queued under Stream::mu in a TxQueue (tx_queue.h),
// what becomes of one whose region vanished, and the engine's interest in room to send.
#include <sys/socket.h>

#include "common/log.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/queue_pair.h"

namespace rpma::rc {

void QueuePair::update_mask(Stream &s) {
    if (!s.key) return;
    uint32_t m = 0;
    if (s.rx_on) m |= s.stalled || s.backoff ? EPOLLRDHUP : EPOLLIN | EPOLLRDHUP;
    if (s.want_out) m |= EPOLLOUT;
    engine_->modify(s.fd.get(), s.key, s.io->watch(m, s.backoff && !s.stalled));
}

bool QueuePair::region_vanished(Stream &s, TxItem &it) {
    bool started = s.tx.started(it);
    bool message = it.hdr.op == static_cast<uint8_t>(Op::kSend) ||
                   it.hdr.op == static_cast<uint8_t>(Op::kSendImm);
    if (is_request(it.hdr.op)) {
        // The source was deregistered: the request completes with LOC_PROT_ERR in its turn. A
        // frame not yet begun becomes an empty write the peer acknowledges; a write half sent
        // is finished with zeros (the target range is then undefined, as after a failed RDMA
        // write). A message half sent ends the connection: finished, it would complete the
        // peer's receive, which on a NIC never sees its last packet and is flushed.
        if (started && message && s.why) return false;  // found before; the stream is down
        s.src_faults.push_back(it.seq);
        faults_.fetch_add(1, std::memory_order_release);
        if (started && message) {
            RPMA_LOG_ERROR("a region was deregistered under a message in progress");
            s.why = "a region was deregistered under a message in progress";
            return false;
        }
        if (!started) {
            it.hdr.op = static_cast<uint8_t>(Op::kWrite);
            it.hdr.flags = kAckRequested;
            it.hdr.length = 0;
            it.hdr.rkey = 0;
            it.hdr.addr = 0;
            it.len = 0;
        } else {
            it.zero_fill = true;
        }
        it.data = nullptr;
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
    if (faults_.load(std::memory_order_acquire) == 0) return false;
    Stream &s = req();
    std::lock_guard lk(s.mu);
    auto it = std::find(s.src_faults.begin(), s.src_faults.end(), seq);
    if (it == s.src_faults.end()) return false;
    s.src_faults.erase(it);
    faults_.fetch_sub(1, std::memory_order_relaxed);
    return true;
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
    s.corked.store(false, std::memory_order_relaxed);
    if (s.want_out) {
        s.want_out = false;
        update_mask(s);
    }
    return true;
}

void QueuePair::send_frame(Stream &s, const FrameHeader &h) {
    std::lock_guard lk(s.mu);
    s.tx.push(TxItem{h, nullptr, 0, nullptr});
    flush_tx(s);  // a broken stream shows up on the receive side as well
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
