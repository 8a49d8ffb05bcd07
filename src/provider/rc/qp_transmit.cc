// The transmit side of both streams: frames queued under Stream::mu and gathered into one
// sendmsg, with every region they point into held across the call.
#include <sys/socket.h>

#include "common/log.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/queue_pair.h"

namespace rpma::rc {

void QueuePair::enqueue(Stream &s, TxItem item) {
    if (item.guard) ++s.data_items;
    s.txq.push_back(std::move(item));
}

void QueuePair::update_mask(Stream &s) {
    if (!s.key) return;
    uint32_t m = 0;
    if (s.rx_on) m |= s.stalled || s.backoff ? EPOLLRDHUP : EPOLLIN | EPOLLRDHUP;
    if (s.want_out) m |= EPOLLOUT;
    engine_->modify(s.fd.get(), s.key, s.io->watch(m, s.backoff && !s.stalled));
}

bool QueuePair::region_vanished(Stream &s, TxItem &it) {
    bool started = &it == &s.txq.front() && s.tx_off > 0;
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
    it.guard.reset();
    --s.data_items;
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
    while (!s.txq.empty()) {
        iovec iov[kMaxIov];
        Region *held[kMaxIov];
        int nheld = 0;
        TxItem *dead = nullptr;
        int niov = gather(s, iov, held, &nheld, &dead);
        ssize_t n = -1;
        int err = 0;
        if (!dead) {
            n = s.io->writev(iov, niov);
            err = errno;
        }
        for (int i = 0; i < nheld; ++i) held[i]->release();
        if (dead) {
            if (region_vanished(s, *dead)) continue;
            // the engine sees the end of the stream even when an application thread's post
            // found this
            s.io->shutdown(SHUT_RDWR);
            return false;
        }
        if (n < 0 && err == EINTR) continue;
        if (n < 0 && err == EAGAIN) {
            if (!s.want_out) {
                s.want_out = true;
                update_mask(s);
            }
            return true;
        }
        if (n < 0) {
            s.peer_end = ended_by_peer(n, err);
            s.why = strerror(err);
            // as above: a socket shows its error to the engine by itself, a shm ring's bad
            // index (EPROTO) does not
            s.io->shutdown(SHUT_RDWR);
            return false;
        }
        consume(s, static_cast<size_t>(n));
    }
    s.corked.store(false, std::memory_order_relaxed);
    if (s.want_out) {
        s.want_out = false;
        update_mask(s);
    }
    return true;
}

int QueuePair::gather(Stream &s, iovec *iov, Region **held, int *nheld, TxItem **dead) {
    int niov = 0;
    size_t off = s.tx_off;
    for (auto it = s.txq.begin(); it != s.txq.end() && niov + 2 <= kMaxIov; ++it) {
        if (off < kHeaderSize) {
            iov[niov++] = {reinterpret_cast<char *>(&it->hdr) + off, kHeaderSize - off};
            off = 0;
        } else {
            off -= kHeaderSize;
        }
        if (it->len > off) {
            if (it->zero_fill) {
                size_t n = std::min(it->len - off, sizeof(g_zero));
                iov[niov++] = {const_cast<char *>(g_zero), n};
                if (n < it->len - off) break;
                off = 0;
                continue;
            }
            if (it->guard) {
                // Held across the send: deregistration waits for it, and after it no byte of
                // the region is read.
                if (!it->guard->acquire()) {
                    *dead = &*it;
                    break;
                }
                held[(*nheld)++] = it->guard.get();
            }
            iov[niov++] = {const_cast<char *>(it->data) + off, it->len - off};
        }
        off = 0;
    }
    return niov;
}

void QueuePair::consume(Stream &s, size_t n) {
    while (n > 0) {
        size_t left = kHeaderSize + s.txq.front().len - s.tx_off;
        if (n < left) {
            s.tx_off += n;
            return;
        }
        n -= left;
        const TxItem &it = s.txq.front();
        if (is_request(it.hdr.op) &&
            ((it.hdr.flags & kAckRequested) || it.hdr.op == static_cast<uint8_t>(Op::kRead)))
            s.answer_due = it.seq;  // its ACK or its data will come back on this stream
        if (it.guard) --s.data_items;
        s.txq.pop_front();
        s.tx_off = 0;
    }
}

void QueuePair::send_frame(Stream &s, const FrameHeader &h) {
    std::lock_guard lk(s.mu);
    enqueue(s, TxItem{h, nullptr, 0, nullptr});
    flush_tx(s);  // a broken stream shows up on the receive side as well
}

void QueuePair::append_ack(Stream &s) {
    uint64_t seq = responder_.take_ack();
    // ACKs are cumulative: one still waiting in the queue is raised instead of adding another,
    // so a peer that does not read its answers cannot grow the queue with them.
    if (!s.txq.empty() && s.txq.back().hdr.op == static_cast<uint8_t>(Op::kAck) &&
        !(s.txq.size() == 1 && s.tx_off > 0)) {
        s.txq.back().hdr.aux = seq;
        return;
    }
    FrameHeader a{};
    a.op = static_cast<uint8_t>(Op::kAck);
    a.aux = seq;
    enqueue(s, TxItem{a, nullptr, 0, nullptr});
}

bool QueuePair::answer_now() {
    Stream &s = resp();
    std::lock_guard lk(s.mu);
    if (responder_.ack_owed()) append_ack(s);
    return s.txq.empty() || flush_tx(s);
}

bool QueuePair::queue_answer(const FrameHeader &h, const char *data, std::shared_ptr<Region> region,
                             bool batch) {
    Stream &s = resp();
    std::lock_guard lk(s.mu);
    responder_.answered(h.aux);
    enqueue(s, TxItem{h, data, h.length, std::move(region)});
    return (batch && s.txq.size() < kAnswersPerSend) || flush_tx(s);
}

bool QueuePair::answers_block(const Stream &s, bool modifies) noexcept {
    return s.txq.size() >= kMaxQueuedAnswers || (modifies && s.data_items > 0);
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
