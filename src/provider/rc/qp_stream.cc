// A queue pair's stream (qp_stream.h): its engine registration and its transmit side.
#include "provider/rc/qp_stream.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/requester.h"
#include "provider/rc/responder.h"
#include "provider/soft/engine.h"

namespace rpma::rc {

void QpStream::update_mask() {
    if (!key) return;
    uint32_t m = 0;
    bool taken = sleeper.load() != Sleeper::kEngine;  // a thread reads it
    if (rx_on) m |= stalled() || taken ? EPOLLRDHUP : EPOLLIN | EPOLLRDHUP;
    // A doorbell is all of a shm stream's readiness: while a thread has it, the engine leaves it
    // to that thread, unless it waits for room itself (the end of the peer's process still
    // comes through the control socket: tcp::QueuePair::on_events).
    if (taken && io->doorbell()) m &= ~uint32_t{EPOLLRDHUP};
    if (want_out) m |= EPOLLOUT;
    // Edge-triggered (docs/rc-rebuild.md, f4): an event schedules the stream's task, whose
    // runner reads until the stream blocks, wherever it runs. A change here makes epoll look at
    // the stream again, so what is there already is reported once more.
    engine->modify(fd.get(), key, io->watch(m) | EPOLLET);
}

void QpStream::leave_engine() {
    uint64_t k;
    {
        std::lock_guard lk(mu);
        k = std::exchange(key, 0);
    }
    if (k) engine->remove(k);
}

bool QpStream::region_vanished(TxItem &it) {
    bool started = tx.started(it);
    if (is_request(it.hdr.op)) {
        // the requester marks it and rewrites the frame, or says why the stream must end
        if (const char *end = requester->source_vanished(it, started, why)) {
            why = end;
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
        nak_queued = true;
    } else {
        // Half an answer is out: only ending the connection keeps the peer from using it.
        RPMA_LOG_ERROR("a region was deregistered while the peer read it");
        why = "a region was deregistered under a read answer in progress";
        return false;
    }
    tx.drop_region(it);
    return true;
}

bool QpStream::flush_tx() {
    for (;;) {
        switch (tx.send(*io)) {
            case TxQueue::Sent::kDead:
                if (region_vanished(tx.dead())) continue;
                // the engine sees the end of the stream even when an application thread's post
                // found this
                io->shutdown(SHUT_RDWR);
                return false;
            case TxQueue::Sent::kBlocked:
                if (!want_out) {
                    want_out = true;
                    update_mask();
                }
                return true;
            case TxQueue::Sent::kError:
                peer_end = ended_by_peer(-1, tx.error());
                why = strerror(tx.error());
                // as above: a socket shows its error to the engine by itself, a shm ring's bad
                // index (EPROTO) does not
                io->shutdown(SHUT_RDWR);
                return false;
            case TxQueue::Sent::kAll:
                break;
        }
        break;
    }
    if (want_out) {
        want_out = false;
        update_mask();
    }
    return true;
}

void QpStream::append_ack(uint64_t seq) {
    // ACKs are cumulative: one still waiting in the queue is raised instead of adding another,
    // so a peer that does not read its answers cannot grow the queue with them.
    TxItem *last = tx.unsent_back();
    if (last && last->hdr.op == static_cast<uint8_t>(Op::kAck)) {
        last->hdr.aux = seq;
        return;
    }
    FrameHeader a{};
    a.op = static_cast<uint8_t>(Op::kAck);
    a.aux = seq;
    tx.push(TxItem{a, nullptr, 0, nullptr});
}

bool QpStream::answers_block(bool modifies) const noexcept {
    return tx.size() >= kMaxQueuedAnswers || (modifies && tx.data_items() > 0);
}

bool QpStream::take_drained() noexcept {
    if (stall != Stall::kAnswers || answers_block(true)) return false;
    stall = Stall::kResume;
    return true;
}

void QpStream::settle_for_close(Responder *answers) {
    uint64_t limit = UINT64_MAX;  // answers: the last request whose answer still goes out
    // A frame half sent is finished, from its region while the region lives (it belongs to the
    // peer, not to the connection); see flush_tx for a region that dies.
    tx.prune([&](TxItem &it) {
        Op op = static_cast<Op>(it.hdr.op);
        bool drop;
        if (!answers)
            drop = is_request(it.hdr.op);  // never seen by the peer: it flushes them anyway
        else if (op == Op::kReadResp && it.guard && limit == UINT64_MAX)
            limit = it.hdr.aux - 1, drop = true;
        else
            drop = limit != UINT64_MAX && op != Op::kDisconnect && op != Op::kAck;
        if (answers && !drop && op == Op::kAck && limit != UINT64_MAX) {
            it.hdr.aux = std::min(it.hdr.aux, limit);  // never acknowledge a dropped read
            drop = it.hdr.aux == 0;
        }
        return drop;
    });
    if (answers) {
        if (uint64_t last = answers->unacked(limit)) {
            FrameHeader a{};
            a.op = static_cast<uint8_t>(Op::kAck);
            a.aux = last;
            answers->answered(last);
            tx.insert_before_disconnect(TxItem{a, nullptr, 0, nullptr});  // the peer counts it
        }
    }
}

}  // namespace rpma::rc
