// The progress of the RC queue pair's streams (progress.h): engine events, the readers' tasks,
// threads that drive their own connection, and the requester's sends.
#include "provider/rc/progress.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstring>

#include "common/log.h"
#include "provider/rc/completer.h"
#include "provider/rc/connection.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/responder.h"
#include "provider/soft/recv_queue.h"

namespace rpma::rc {

namespace {
using Cm = Connection::Cm;
constexpr std::chrono::microseconds kAnswerWait{10};
}  // namespace

QpStream *Progress::stream_of(int fd) noexcept {
    if (fd == main_.fd.get()) return &main_;
    return fd == join_.fd.get() ? &join_ : nullptr;
}

Progress::Progress(Host &host, Engine &engine, Connection &conn, Completer &completer,
                   Responder &responder, QpStream &main, QpStream &join, RecvQueue &receives,
                   Cq *recv_cq) noexcept
    : host_(host),
      engine_(engine),
      conn_(conn),
      completer_(completer),
      responder_(responder),
      main_(main),
      join_(join),
      receives_(receives),
      recv_cq_(recv_cq) {}

std::shared_ptr<Handler> Progress::handler(const std::shared_ptr<Handler> &owner) {
    std::shared_ptr<Handler> self(owner, this);  // lives as long as its queue pair
    // Set once, before the first registration: later ones (another stream, an upgrade's) may
    // come while the engine serves the first and reads these.
    std::call_once(bound_, [&] {
        self_ = self;
        owner_ = owner;
    });
    return self;
}

void Progress::on_timer() {
    // A stream a thread took goes back to the engine once a check finds that no thread read it
    // since the last one (a thread that stops waiting or polling says nothing).
    Clock::rep due = check_at_.load();
    if (due == 0 || Clock::now().time_since_epoch().count() < due) return;
    check_at_.store(0);
    if (!check_taken()) return;
    unsigned shift = check_shift_.load(std::memory_order_relaxed);
    if (shift < kParkCheckMaxShift) check_shift_.store(++shift, std::memory_order_relaxed);
    schedule_park_check(check_at_, engine_, self_, shift);
}

bool Progress::check_taken() {
    bool again = false;
    for (QpStream *s : {&main_, &join_}) {
        QpStream::Sleeper st = s->sleeper.load();
        if (st == QpStream::Sleeper::kEngine) continue;
        QpStream::Sleeper next = st == QpStream::Sleeper::kThread ? QpStream::Sleeper::kThreadIdle
                                                                  : QpStream::Sleeper::kEngine;
        if (!s->sleeper.compare_exchange_strong(st, next) || next != QpStream::Sleeper::kEngine) {
            again = true;  // (a failed exchange: a thread read it meanwhile)
            continue;
        }
        check_shift_.store(0, std::memory_order_relaxed);  // the next take is checked soon
        std::lock_guard lk(s->mu);
        s->update_mask();  // the modification reports what came meanwhile
    }
    return again;
}

void Progress::lost(QpStream &s, const char *otherwise) {
    auto [why, peer_end] = s.end_cause(otherwise);
    host_.lost(why, peer_end);
}

void Progress::on_events(int fd, uint32_t events) {
    // (another fd: one the transport swapped, whose registration is on its way out)
    if (QpStream *s = stream_of(fd)) engine_events(*s, s->io->woken(events));
}

void Progress::spin(int fd) {
    QpStream *s = stream_of(fd);
    if (!s) return;
    uint32_t ev = s->io->ready();
    if (ev & EPOLLIN) {
        std::unique_lock rl(s->rx_mu, std::try_to_lock);
        // its holder reads it: the engine does not step in; a stalled stream waits for a post
        if (!rl || !s->readable()) ev &= ~uint32_t{EPOLLIN};
    }
    if (ev) engine_events(*s, ev);
}

void Progress::engine_events(QpStream &s, uint32_t events) {
    bool spin = s.io->doorbell() && engine_.spins();
    // The engine that polls next reads the peer's requests as their only reader: the peer
    // need not ring while it spins (the stream is armed when the spin ends). Answers are
    // mostly read by the application's waiting or polling threads: a late doorbell there.
    auto who = !spin           ? ByteStream::Reader::kWaiter
               : &s == &resp() ? ByteStream::Reader::kSpinner
                               : ByteStream::Reader::kPoller;
    uint64_t before = spin ? s.io->progress() : 0;
    bool read = stream_events(s, events, who);
    if (!spin) {
        // The peer's requests came on a socket: the next is likely close (a write's flush, the
        // next write of a loop), so the engine polls a while rather than sleep.
        if (read && &s == &resp() && (events & EPOLLIN)) engine_.keep_polling();
        return;
    }
    // Bytes moved: the next request (or room for the rest of an answer) is likely close, so
    // the engine polls a while rather than sleep, and spin_end arms the stream when it stops.
    // Without progress it sleeps, and the stream (read as kSpinner) asks for a doorbell now.
    if (s.io->progress() != before)
        engine_.keep_spinning();
    else
        rearm(s);
}

void Progress::rearm(QpStream &s) {
    // Another holder of the stream asked for what it needs itself (drive, progress).
    std::unique_lock rl(s.rx_mu, std::try_to_lock);
    if (rl && s.io->arm() && s.readable())
        s.io->pass_wake();  // input came after the read: the peer saw no flag to ring
}

void Progress::spin_end(int fd) {
    if (QpStream *s = stream_of(fd)) rearm(*s);  // a doorbell again
}

bool Progress::stream_events(QpStream &s, uint32_t events, ByteStream::Reader who) {
    Cm cm = conn_.state();
    if (cm == Cm::kConnecting || cm == Cm::kAwaitReply) {
        host_.setup_events(s, events);  // the transport's handshake
        return false;
    }
    if (cm == Cm::kClosing) {
        host_.linger_events(s, events);
        return false;
    }
    if (cm == Cm::kDone || cm == Cm::kIdle) {
        std::lock_guard lk(s.mu);
        if ((events & EPOLLOUT) && s.flush_tx() && !s.tx.empty()) return false;
        uint64_t key = std::exchange(s.key, 0);
        if (key) engine_.remove(key);
        return false;
    }
    if ((events & EPOLLOUT) && !on_writable(s, true)) return false;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        bool stalled;
        {
            std::lock_guard lk(s.mu);  // a waiting thread may run the responder
            stalled = s.stalled();
        }
        if (stalled && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
            // The stalled request hides what follows it. A Disconnect on the other stream and
            // an orderly end of this one mean the peer closed in order (it deleted the
            // connection while its send waited for a receive).
            QpStream &other = &s == &main_ ? join_ : main_;
            if (!other.disc_rx) read_stream_if_free(other, who);
            if (other.disc_rx && !(events & EPOLLERR)) {
                s.disc_rx = true;
                {
                    std::lock_guard lk(s.mu);
                    s.rx_on = false;
                    s.update_mask();
                }
                host_.maybe_closed();
                return false;
            }
            // The end came from the peer's kernel unless the socket reports a timeout or an
            // unreachable network.
            int err = (events & EPOLLERR) ? s.io->take_error() : 0;
            host_.lost("the peer went away while its send waited for a receive",
                       err == 0 || ended_by_peer(-1, err));
            return false;
        }
        if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) s.end_seen.store(true);
        read_stream_if_free(s, who);
        return true;
    }
    return false;
}

bool Progress::on_writable(QpStream &s, bool engine) {
    if (&s == &req()) {
        if (run_requester()) return true;  // (a runner elsewhere was armed: it sends)
        lost(s, "send failed");
        return false;
    }
    bool sent, drained = false;
    {
        std::lock_guard lk(s.mu);
        sent = s.flush_tx();
        drained = sent && s.take_drained();
    }
    if (!sent) {
        lost(s, "send failed");  // not under s.mu: lost() takes it
        return false;
    }
    if (&s == &resp()) responder_.absorb_queued_nak();
    if (drained) {
        // the request waiting for our answers to leave
        if (engine) {
            responder_resume_.store(true);
            run_responder(ByteStream::Reader::kWaiter);
        } else {
            host_.resume_responder();
        }
    }
    return true;
}

void Progress::read_stream_if_free(QpStream &s, ByteStream::Reader who) {
    // Each stream's reader is a task (the peer's requests: the responder; their answers: the
    // completer). The streams are registered edge-triggered, so an event during another
    // thread's pass (a waiter's, a poller's) only arms the task, and that thread reads again
    // before it lets go: the engine neither waits for it nor keeps waking for the stream.
    if (&s == &resp()) {
        run_responder(who);
        return;
    }
    if (!completer_task_.schedule()) return;
    {
        std::lock_guard rl(s.rx_mu);  // contended only by the engine's try_lock, as below
        read_stream(s, who);
    }
    run_completer(who);
}

void Progress::run_completer(ByteStream::Reader who) {
    QpStream &s = req();
    while (completer_task_.finish()) {
        // Scheduled during the pass (the engine's EPOLLIN): read again, as no new edge comes for
        // what arrived since this pass's read looked. (A removed stream belongs to a connection
        // that is no longer established.)
        bool go;
        {
            std::lock_guard lk(s.mu);
            go = s.rx_on;
        }
        if (go && conn_.established()) {
            std::lock_guard rl(s.rx_mu);
            read_stream(s, who);
        }
    }
    turn_.let_go();  // a waiter that slept on its own CQ meanwhile reads next
}

void Progress::run_responder(ByteStream::Reader who, bool owned) {
    if (!owned && !responder_task_.schedule()) return;  // armed: its runner passes again
    QpStream &s = resp();
    run_passes(responder_task_, [&] {
        bool go;
        {
            std::lock_guard lk(s.mu);
            // a resume re-runs the stalled request (RNR, answers drained, the completer)
            if (responder_resume_.exchange(false) && s.stalled()) {
                s.stall = QpStream::Stall::kNone;
                s.update_mask();
            }
            go = s.rx_on && !s.stalled() && !conn_.closed();
        }
        if (go) {
            // never contended but by the engine's try_lock (spin, rearm)
            std::lock_guard rl(s.rx_mu);
            read_stream(s, who);
        }
        return true;
    });
}

void Progress::progress(Cq &cq, bool wait, int channel_fd) {
    // The peer's requests can produce a completion that cq's caller waits for only where cq
    // takes receive completions and a receive is posted: elsewhere the engine serves them.
    bool recvs = &cq == recv_cq_ && receives_.holds_recv();
    if (wait) {
        CancelOff off;  // but in the waits (sleep, DriveTurn), as the caller has it
        drive(cq, channel_fd, recvs, off);
        return;
    }
    if (!conn_.established()) return;  // the handshake owns the streams until then
    QpStream &s = req();
    if (!completer_task_.try_own()) return;  // someone reads it already (a waiter asleep on cq)
    // Owning the completer, this thread is the only one that may sleep on cq (ProgressHook):
    // disarmed, its own pushes write no channel event.
    bool armed = cq.disarm();
    // The first poll after a waiting pass that read what woke it (the get_wc that drains what
    // rpma_cq_wait returned) reads nothing: that pass just read the streams up to their end,
    // and what came since is read by the next wait, at once, or the next poll.
    bool look = !drained_by_wait_.exchange(false, std::memory_order_relaxed);
    bool serves = recvs && waiter_serves_.load(std::memory_order_relaxed);
    bool go = false;
    if (look) {
        std::lock_guard lk(s.mu);
        go = s.key && s.rx_on;
    }
    // A poller takes the answer stream as a waiter does, so the engine does not wake beside the
    // spinner for every answer. Before f4 only where requests came too: lending then cost two
    // epoll_ctl per poll and made write+flush slower; a take now costs one per tenure.
    if (go && s.take()) rewatch(s, true);
    if (go) {
        std::lock_guard rl(s.rx_mu);
        read_stream(s, ByteStream::Reader::kPoller);
    }
    // A spinning thread pays a system call for each look at the request stream: it looks on
    // every poll only where requests came before (GPSPM, request/reply), else now and then.
    // Served before the completer is let go, so the receives it completes are pushed while cq
    // is still disarmed.
    if (look && recvs &&
        (serves ||
         (polls_.fetch_add(1, std::memory_order_relaxed) + 1) % kPollsPerRequestLook == 0))
        serve_requests(ByteStream::Reader::kPoller);
    run_completer(ByteStream::Reader::kPoller);
    if (armed) cq.arm();
}

void Progress::drive(Cq &cq, int channel_fd, bool serve, const CancelOff &off) {
    QpStream &s = req();
    QpStream &r = resp();
    // This thread runs the completer across its poll; the engine's events meanwhile only arm
    // it (read_stream_if_free), and this thread reads again before it lets go. Owned already:
    // sleep on cq until this thread's turn (DriveTurn); the caller looks at cq and comes back.
    if (!completer_task_.try_own()) return turn_.wait(cq, channel_fd, completer_task_, off);
    // Disarmed, the completions this thread pushes write no channel event; a thread asleep on
    // cq without the completer (DriveTurn) is woken when this one lets it go. Armed again only
    // for the sleep below.
    cq.disarm();
    drained_by_wait_.store(false, std::memory_order_relaxed);
    bool ok = conn_.established();  // the handshake owns the streams until then
    // The peer's requests are watched too where they can complete a receive on cq (serve, from
    // progress). The fds are read under their locks: set-up may swap them (move_to_upgrade).
    pollfd p[3] = {{channel_fd, POLLIN, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0}};
    {
        std::lock_guard lk(s.mu);
        ok = ok && s.key != 0 && s.rx_on;
        p[1].fd = s.fd.get();
    }
    // Input wakes every thread that sleeps on it: this one takes the stream from the engine.
    if (ok && s.take(true)) rewatch(s, true);
    // Where it watches the peer's requests, this thread owns their reader too (the responder)
    // across its poll: the engine's events on that stream meanwhile only arm it, and this thread
    // serves them as it wakes, so a request costs the engine no read. Only a pass stalls the
    // responder; a stalled one waits for a post, so this thread lets it go at once (a resume
    // that armed it meanwhile runs here), and one found running is left to its runner.
    bool r_own = ok && serve && responder_task_.try_own();
    serve = false;
    if (r_own) {
        {
            std::lock_guard lk(r.mu);
            serve = r.key != 0 && r.rx_on && !r.stalled();
            p[2].fd = r.fd.get();
        }
        if (!serve) serve_requests(ByteStream::Reader::kWaiter, true, false);
        r_own = serve;
    }
    if (serve && waiter_serves_.load(std::memory_order_relaxed) && r.take(true)) rewatch(r, true);
    std::unique_lock rl(s.rx_mu);
    if (!ok) {
        rl.unlock();
        run_completer(ByteStream::Reader::kWaiter);
        cq.arm();  // no longer the owner: armed for good, this thread reads nothing more
        CancelOn on(off);  // holding nothing
        if (cq.empty()) ::poll(p, 1, -1);
        return;
    }
    // A doorbell stream (shm) first waits a moment, since a round trip with a spinning peer
    // takes microseconds and a sleep costs more; then it asks to be woken (wait: stale rings,
    // which the edge-triggered engine leaves, are absorbed), and skips the sleep if input came.
    bool ready = s.io->await_input(kAnswerWait);
    int n = 0;
    if (!ready) {
        // Armed before the last look at the ring: a push from now on wakes the poll below.
        cq.arm();
        if (cq.empty()) {
            bool s_in = s.io->wait(EPOLLIN).ready;  // both streams ask, whatever the first says
            bool r_in = serve && r.io->wait(EPOLLIN).ready;
            ready = s_in || r_in;
            if (!ready) n = sleep(p, serve ? 3 : 2, off, r_own, rl);
        }
        cq.disarm();
    }
    // A doorbell taken here may also have meant room to send (woken: EPOLLOUT): handled here
    // too, as the engine would have.
    bool s_out = n > 0 && p[1].revents && (s.io->woken(EPOLLIN) & EPOLLOUT);
    if (ready || (n > 0 && p[1].revents)) read_stream(s);
    rl.unlock();
    run_completer(ByteStream::Reader::kWaiter);
    if (s_out) on_writable(s, false);  // (a failure was handled: the connection is lost)
    bool r_out = n > 0 && serve && p[2].revents && (r.io->woken(EPOLLIN) & EPOLLOUT);
    bool r_in = serve && (ready || (n > 0 && p[2].revents));
    if (r_own) serve_requests(ByteStream::Reader::kWaiter, true, r_in);  // then lets it go
    if (r_out) on_writable(r, false);
    // this pass read what woke it: see progress
    if (ready || (n > 0 && p[1].revents) || r_in)
        drained_by_wait_.store(true, std::memory_order_relaxed);
}

int Progress::sleep(pollfd *p, nfds_t n, const CancelOff &off, bool r_own,
                    std::unique_lock<RankedMutex> &rl) {
    struct GiveBack {
        Progress &pr;
        bool r_own;
        std::unique_lock<RankedMutex> &rl;
        bool woke = false;
        ~GiveBack() {
            if (woke) return;  // else a cancellation's unwind: as drive's end, reading nothing
            rl.unlock();
            pr.run_completer(ByteStream::Reader::kWaiter);
            if (r_own) pr.serve_requests(ByteStream::Reader::kWaiter, true, false);
        }
    } back{*this, r_own, rl};
    CancelOn on(off);
    int ready = ::poll(p, n, -1);
    back.woke = true;
    return ready;
}

void Progress::serve_requests(ByteStream::Reader who, bool owned, bool look) {
    if (!owned && !responder_task_.schedule()) return;  // armed: its runner reads them
    QpStream &r = resp();
    bool go;
    {
        std::lock_guard lk(r.mu);
        go = look && r.key && r.rx_on && !r.stalled();  // a stalled request waits for its resume
    }
    // where application threads serve them, requests do not wake the engine as well
    if (go && waiter_serves_.load(std::memory_order_relaxed) && r.take()) rewatch(r, true);
    uint64_t before = responder_.executed();
    if (go || responder_task_.finish())  // (not go, but scheduled meanwhile: pass for them)
        run_responder(who, true);
    if (responder_.executed() != before) waiter_serves_.store(true, std::memory_order_relaxed);
}

void Progress::rewatch(QpStream &s, bool taken) {
    if (!taken && s.io->doorbell()) {
        s.io->pass_wake();
        return;
    }
    {
        std::lock_guard lk(s.mu);
        s.update_mask();
    }
    if (taken) schedule_park_check(check_at_, engine_, self_);
}

void Progress::read_stream(QpStream &s, ByteStream::Reader who) {
    s.io->reader(who);
    Step st = s.answers_in ? completer_.read(*s.io, s.disc_rx) : responder_.read(*s.io, s.disc_rx);
    bool left = false;
    if (st == Step::kBlock) {
        s.io->yielded();  // a doorbell stream rings itself for input left
        // Registered edge-triggered: input left behind a spent budget, or the peer's end the
        // engine saw behind a short read, brings no new edge, so this reader asks for one.
        bool drained = s.answers_in ? completer_.drained() : responder_.drained();
        left = s.end_seen.exchange(false) || (!drained && !s.io->doorbell());
    }
    s.io->reader(ByteStream::Reader::kWaiter);
    if (left) rewatch(s);
    if (st == Step::kFatal) {
        // A protocol error names itself; the stream's end is the first cause (flush_tx may
        // have shut it down).
        const ReadEnd &e = s.answers_in ? completer_.end() : responder_.end();
        std::lock_guard lk(s.mu);
        if (e.protocol) {
            s.why = e.why;
        } else if (!s.why) {
            s.why = e.why;
            s.peer_end = e.peer_end;
        }
    }
    finish_read(s, st);
}

void Progress::finish_read(QpStream &s, Step st) {
    bool responder = !s.answers_in;
    if (st == Step::kFatal) {
        if (s.disc_rx) return;
        bool eof = false;
        if (responder && responder_.end().eof) {
            std::lock_guard lk(s.mu);
            eof = s.why == responder_.end().why;  // not a cause flush_tx found first
        }
        if (eof) {
            // The peer ended the stream of its requests in order; its ACKs of ours, sent before
            // that, may still wait on the answer stream (two streams, not one wire). Its reader
            // finds them and then that stream's end; a peer that never ends it loses the
            // connection when kLastAnswersWait passes (on_timer). (A reset ends it at once.)
            QpStream &a = req();
            bool open;
            {
                std::lock_guard lk(a.mu);
                open = a.rx_on;
            }
            if (open) {
                {
                    std::lock_guard lk(s.mu);
                    s.rx_on = false;
                    s.update_mask();
                }
                Clock::time_point due = Clock::now() + kLastAnswersWait;
                if (conn_.set_answers_due(due)) engine_.add_timer(due, owner_);
                return;
            }
        }
        lost(s, "protocol error");
        return;
    }
    if (responder && !answer_now()) {
        lost(s, "send failed");
        return;
    }
    // Our requests queued while this thread read answers go out now (those that waited for an
    // answer too: post_send). A thread already sending them is armed instead of waited for.
    if (!responder && !run_requester()) {
        lost(s, "send failed");
        return;
    }
    bool retry = false;
    if (st == Step::kStall || st == Step::kStop) {
        std::lock_guard lk(s.mu);
        if (st == Step::kStall) {
            if (s.stall == QpStream::Stall::kNone) s.stall = QpStream::Stall::kResume;
            retry = s.take_drained();  // the answers left since the request chose to wait
            s.update_mask();
        } else if (s.rx_on) {
            s.rx_on = false;  // end of this stream's input
            s.update_mask();
        }
    }
    if (responder) responder_.absorb_queued_nak();
    if (retry) host_.resume_responder();
    if (s.disc_rx) host_.maybe_closed();
}

bool Progress::run_requester() {
    if (!requester_task_.schedule()) return true;  // armed: its runner sends again
    QpStream &s = req();
    bool ok = true;
    run_passes(requester_task_, [&] {
        std::lock_guard lk(s.mu);
        ok = s.flush_tx() && ok;  // an empty queue costs no system call
        return true;
    });
    return ok;
}

bool Progress::answer_now() {
    QpStream &s = resp();
    std::lock_guard lk(s.mu);
    if (responder_.ack_owed()) s.append_ack(responder_.take_ack());
    return s.tx.empty() || s.flush_tx();
}
}  // namespace rpma::rc
