// The queue pair's construction and the helpers its parts share (qp_internal.h). The parts:
// qp_close.cc (tear-down), qp_transmit.cc (posts and answers out), qp_stream.cc (a stream's
// frames out), progress.cc (frames in, and who runs what), requester.cc, responder.cc,
// completer.cc; the transport sets the connection up (tcp/queue_pair.cc).
#include "provider/rc/queue_pair.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "provider/rc/qp_internal.h"

namespace rpma::rc {

namespace {

// QP numbers: unique within a process (a counter), and mixed with the pid so that processes
// forked from one parent, or started together, do not all count from the same place.
uint32_t next_qp_num() {
    static std::atomic<uint32_t> counter{1};
    uint32_t mix = static_cast<uint32_t>(getpid()) * 2654435761u;
    uint32_t v;
    do {
        v = (counter.fetch_add(1) ^ (mix >> 8)) & 0xffffffu;  // 24 bits, as on InfiniBand
    } while (v == 0);                                         // QP 0 is special on InfiniBand
    return v;
}

}  // namespace

char g_discard[kDiscardSize];
const char g_zero[kZeroSize] = {};

ibv_wc_status nak_to_status(uint16_t st) {
    switch (static_cast<NakStatus>(st)) {
        case NakStatus::kAccess:
            return IBV_WC_REM_ACCESS_ERR;
        case NakStatus::kInvalidRequest:
            return IBV_WC_REM_INV_REQ_ERR;
        default:
            return IBV_WC_REM_OP_ERR;
    }
}

QueuePair::QueuePair(Engine *engine, MrTable *mrs, const QpConfig &cfg,
                     FdQueue<rpma_conn_event> *events)
    : engine_(engine),
      mrs_(mrs),
      cfg_(cfg),
      qp_num_(next_qp_num()),
      rq_(cfg.rq_size),
      conn_(events, kCmRank),
      completer_(sq_, sq_mu_, Completer::Target{cfg.cq, qp_num_, &conn_.remote_qp()}, *this),
      requester_(sq_, completer_, cfg.sq_size),
      responder_(mrs, Responder::Target{cfg.recv_cq, qp_num_, &conn_.remote_qp()}, *this),
      progress_(*this, *engine, conn_, completer_, responder_, main_, join_,
                cfg.srq ? *cfg.srq : rq_, cfg.recv_cq) {}

QueuePair::~QueuePair() = default;

void QueuePair::set_cq_hook(bool on) noexcept {
    ProgressHook *h = on ? &progress_ : nullptr;
    cfg_.cq->set_hook(h);
    // an SRQ's RCQ serves many queue pairs: no one queue pair's hook runs it
    if (cfg_.recv_cq != cfg_.cq && !cfg_.srq) cfg_.recv_cq->set_hook(h);
}

bool QueuePair::establish_stream(Stream &s, uint32_t events) {
    // The key is the stream's before the first event can come: the engine may run the whole
    // handshake before add() returns here, and the transport may swap the stream's fd then
    // (shm), which must find this registration to remove it.
    uint64_t key = engine_->reserve_key();
    int fd;
    uint32_t watch;
    {
        std::lock_guard lk(s.mu);
        s.key = key;
        fd = s.fd.get();
        watch = s.io->watch(events) | EPOLLET;  // as update_mask
    }
    // No QP lock across add(): it waits for the engine thread, which may need one.
    bool added = engine_->add(fd, watch, progress_.handler(shared_from_this()), key);
    {
        std::lock_guard lk(s.mu);
        if (s.key == key) {
            if (!added) s.key = 0;
            if (added) s.update_mask();  // the engine may have moved on meanwhile
            return added;
        }
    }
    // leave_engine ran meanwhile (the connection failed or closed), maybe before the
    // registration existed: it goes now. The failure is the connection's, not this call's.
    if (added) engine_->remove(key);
    return true;
}

std::optional<prov::RecvWr> QueuePair::take_recv() {
    // The responder's task runs this, one thread at a time: the first call sets the reference.
    if (recv_wait_.ref.expired())
        recv_wait_.ref = std::shared_ptr<RecvWaiter>(shared_from_this(), &recv_wait_);
    return (cfg_.srq ? cfg_.srq : &rq_)->take_or_wait(recv_wait_);
}

void QueuePair::enter_error(const prov::RecvWr *failed, ibv_wc_status st) {
    // One hold of sq_mu_: a post finds the error state only once everything older is flushed.
    std::lock_guard lk(sq_mu_);
    if (failed) responder_.push_recv_wc(*failed, st, IBV_WC_RECV, 0, false, 0);
    completer_.flush();
}

void QueuePair::flush_receives() {
    for (auto &r : rq_.drain()) responder_.flush_recv(r);
    // An SRQ's receives stay for the other connections, and so does a wake this one was handed.
    if (cfg_.srq) cfg_.srq->leave(recv_wait_);
}

void QueuePair::resume_responder() {
    progress_.request_resume();
    // Scheduled on the engine, never here: callers hold sq_mu_ (the completer) or the receive
    // queue's lock. Whoever runs the responder then takes the resume in its next pass.
    engine_->post([w = weak_from_this()] {
        auto self = w.lock();
        if (self && !self->conn_.closed())
            self->progress_.run_responder(ByteStream::Reader::kWaiter);
    });
}

}  // namespace rpma::rc
