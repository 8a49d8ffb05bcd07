// Tear-down: disconnect, an orderly close on delete (linger), a lost connection, and the
// timers of set-up and linger.
#include <sys/socket.h>

#include "common/log.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/queue_pair.h"

namespace rpma::rc {

void QueuePair::close() {
    set_cq_hook(false);  // a thread on the CQs no longer runs this queue pair
    // On the engine thread, as a barrier: work already queued for it has run once this returns,
    // and anything queued later sees closed(), so nothing touches the CQs the caller frees next.
    engine_->run_sync([this] {
        const Clock::time_point deadline = Clock::now() + kLingerTimeout;
        bool graceful = conn_.begin_close(deadline);
        // closed: a wake the responder was handed would go unused (resume_responder)
        if (cfg_.srq) cfg_.srq->leave(recv_wait_);
        {
            std::lock_guard lk(sq_mu_);
            completer_.abandon();  // nobody is left to see their completions
        }
        if (!graceful) {
            remove_streams(false);  // at once: this runs on the engine thread
            return;
        }
        // Deleting a live connection closes it as rdma_disconnect would: the peer gets CLOSED. What
        // is queued must not reach for the application's memory once delete returns.
        bool queue_ours = conn_.take_disconnect();  // not yet queued by send_disconnect
        for (Stream *s : {&main_, &join_}) {
            std::lock_guard lk(s->mu);
            s->settle_for_close(s == &progress_.resp() ? &responder_ : nullptr);
            if (queue_ours) {
                FrameHeader h{};
                h.op = static_cast<uint8_t>(Op::kDisconnect);
                s->tx.push(TxItem{h, nullptr, 0, nullptr});
            }
            s->rx_on = s->key != 0;
            s->stall = QpStream::Stall::kNone;  // from now on the peer's input is only drained, by
                                                // the engine
            s->sleeper = Stream::Sleeper::kEngine;
            if (s->flush_tx() && s->tx.empty()) {
                s->io->shutdown(SHUT_WR);
                s->wr_shut = true;
            }
            s->update_mask();
        }
        engine_->add_timer(deadline, weak_from_this());
    });
}

void QueuePair::linger_events(Stream &s, uint32_t events) {
    bool done = false;
    {
        std::lock_guard lk(s.mu);
        if (!s.key) return;
        if ((events & EPOLLOUT) || !s.tx.empty()) {
            if (!s.flush_tx()) {
                // half a read answer is out and its region is gone: only a broken connection
                // keeps the peer from using what it got
                main_.io->shutdown(SHUT_RDWR);
                join_.io->shutdown(SHUT_RDWR);
                done = true;
            }
        }
        if (!done && s.tx.empty() && !s.wr_shut) {
            s.io->shutdown(SHUT_WR);
            s.wr_shut = true;
        }
    }
    // The peer's input is read and dropped until it closes its end: closing a socket with
    // unread input would reset the connection and could destroy our Disconnect on the way.
    while (!done && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        iovec into{g_discard, sizeof(g_discard)};
        ssize_t n = s.io->readv(&into, 1);
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        done = true;
    }
    if (!done) return;
    s.leave_engine();
    stream_removed();
}

void QueuePair::fail_connect(rpma_conn_event ev) {
    if (!conn_.mark_failed()) return;
    {
        std::lock_guard lk(sq_mu_);
        completer_.flush();
    }
    main_.leave_engine();
    join_.leave_engine();
    stream_removed();
    // A server that accepted meanwhile learns at once (end of stream) that this side gave up.
    for (Stream *s : {&main_, &join_}) s->io->shutdown(SHUT_RDWR);
    conn_.post(ev);
}

void QueuePair::lost(const char *why, bool peer_end) {
    if (!conn_.mark_lost()) return;
    if (peer_end)
        RPMA_LOG_NOTICE("connection closed without a disconnect: %s", why);
    else
        RPMA_LOG_NOTICE("connection lost: %s", why);
    {
        std::lock_guard lk(sq_mu_);
        completer_.lost();
    }
    if (!engine_->in_loop()) {
        // Readers stop at once; the engine removes the streams next (remove_streams).
        for (Stream *s : {&main_, &join_}) {
            std::lock_guard lk(s->mu);
            s->rx_on = false;
            s->update_mask();
        }
    }
    remove_streams(false);
    // The peer learns at once (end of stream) instead of at its dead-peer timeout.
    for (Stream *s : {&main_, &join_}) s->io->shutdown(SHUT_RDWR);
    // The peer's process is gone (its kernel ended the streams): a disconnect, as RDMA CM
    // reports it. Anything else broke the connection.
    conn_.post(peer_end ? RPMA_CONN_CLOSED : RPMA_CONN_LOST);
}

void QueuePair::send_disconnect() {
    // Runs on the engine thread, which owns the responder state: everything executed is
    // acknowledged before the stream ends, so the peer never flushes work that was done.
    FrameHeader h{};
    h.op = static_cast<uint8_t>(Op::kDisconnect);
    if (!conn_.take_disconnect()) return;
    for (Stream *s : {&main_, &join_}) {
        std::lock_guard lk(s->mu);
        if (s == &progress_.resp() && responder_.unacked()) s->append_ack(responder_.take_ack());
        s->tx.push(TxItem{h, nullptr, 0, nullptr});
        s->flush_tx();
    }
    // A request waiting for a receive waits no more: dropped, it lets the responder read on to
    // the peer's Disconnect (the peer flushes it, as after an RNR wait that a disconnect ends).
    responder_.drop_requests();
    if (cfg_.srq) cfg_.srq->leave(recv_wait_);
    resume_responder();
}

int QueuePair::disconnect() {
    switch (conn_.request_disconnect()) {
        case Connection::Disconnect::kNothing:
            return 0;
        case Connection::Disconnect::kSend:
            engine_->post([w = weak_from_this()] {
                auto self = w.lock();
                if (self && !self->conn_.closed()) self->send_disconnect();
            });
            return 0;
        case Connection::Disconnect::kEndSetup:
            // LOST, as RDMA CM reports a reply that finds the QP in error; on the engine thread,
            // where the handshake's steps run
            engine_->post([w = weak_from_this()] {
                if (auto self = w.lock()) self->fail_connect(RPMA_CONN_LOST);
            });
            return 0;
    }
    return 0;
}

void QueuePair::maybe_closed() {
    auto answer = [this] {
        if (engine_->in_loop()) {
            send_disconnect();
        } else {
            engine_->post([w = weak_from_this()] {
                auto self = w.lock();
                if (self && !self->conn_.closed()) self->send_disconnect();
            });
        }
    };
    if (!conn_.peer_disconnect(answer, [this] { return main_.disc_rx && join_.disc_rx; })) return;
    {
        std::lock_guard lk(sq_mu_);
        completer_.flush();
    }
    remove_streams(true);  // a stream with frames left: the engine removes it once they are out
    conn_.post(RPMA_CONN_CLOSED);
}

void QueuePair::on_timer() {
    // The connection's deadlines (the taken streams' check is Progress::on_timer).
    switch (conn_.due(Clock::now())) {
        case Connection::Due::kNothing:
            break;
        case Connection::Due::kLingerOver:
            remove_streams(false);  // the peer never closed its end: give up on it
            break;
        case Connection::Due::kAnswersOverdue:
            // the peer ended its requests' stream but never its answers' (finish_read)
            {
                auto [why, peer_end] =
                    progress_.resp().end_cause("the peer ended its requests' stream");
                lost(why, peer_end);
                break;
            }
        case Connection::Due::kSetupTimedOut:
            RPMA_LOG_NOTICE("connection set-up timed out");
            fail_connect(RPMA_CONN_UNREACHABLE);
            break;
    }
}

// lost() and maybe_closed() run on any thread that reads a stream, with its rx_mu held (a
// fatal read in serve_requests, drive or progress). Engine::remove waits for the engine
// thread, which must never wait for such a thread (it did in resume_now, before the responder
// became a task: issue 21). So off the engine thread the streams leave the engine on its next turn.
// close() waits for that turn (run_sync runs commands in order; a close that comes first removes
// them itself), and events meanwhile find the connection done (stream_events), as after a removal.
void QueuePair::remove_streams(bool idle_only) {
    if (!engine_->in_loop()) {
        engine_->post([w = weak_from_this(), idle_only] {
            if (auto self = w.lock()) self->remove_streams(idle_only);
        });
        return;
    }
    for (Stream *s : {&main_, &join_}) {
        bool idle = true;
        if (idle_only) {
            std::lock_guard lk(s->mu);
            idle = s->tx.empty();
        }
        if (idle) s->leave_engine();
    }
    stream_removed();
}

}  // namespace rpma::rc
