#include "core/conn.h"

#include <cstdint>
#include <cstring>
#include <utility>

#include "common/cancel.h"
#include "common/log.h"
#include "core/conn_cfg.h"
#include "core/mr_local.h"
#include "core/mr_remote.h"
#include "core/srq.h"

namespace rpma {

int ConnResources::create(Peer *peer, const ConnCfg &cfg, const char *addr, const char *port,
                          prov::IncomingRequest *in, std::unique_ptr<ConnResources> *out) {
    auto *srq = reinterpret_cast<Srq *>(cfg.srq());
    if (cfg.shared_channel() && srq && srq->rcq()) {
        RPMA_LOG_ERROR(
            "a shared completion channel cannot be combined with an SRQ that has its "
            "own RCQ");
        return RPMA_E_INVAL;
    }
    prov::Domain &dom = peer->domain();
    auto r = std::make_unique<ConnResources>();
    r->srq = srq;
    if (srq) srq->ref();  // released by ~ConnResources, on every path
    r->shared = cfg.shared_channel();
    if (int ret = dom.create_channel(&r->channel)) return ret;
    if (!dom.caps().own_conn_events) {
        r->events = std::make_unique<FdQueue<rpma_conn_event>>();
        if (!r->events->valid()) return RPMA_E_PROVIDER;
    }
    if (int ret = dom.create_cq(r->channel.get(), r->shared, cfg.cq_size(), &r->cq)) return ret;
    // An SRQ with its own RCQ takes every receive: the connection gets none (rpma_conn_get_rcq
    // gives NULL), as upstream makes none, rather than one that would stay empty.
    if (cfg.rcq_size() > 0 && !(srq && srq->rcq())) {
        prov::CompletionChannel *ch = r->channel.get();
        if (!r->shared) {
            if (int ret = dom.create_channel(&r->rcq_channel)) return ret;
            ch = r->rcq_channel.get();
        }
        if (int ret = dom.create_cq(ch, r->shared, cfg.rcq_size(), &r->rcq)) return ret;
    }
    prov::QpAttr qa;
    qa.sq_size = cfg.sq_size();
    qa.rq_size = cfg.rq_size();
    qa.timeout_ms = cfg.timeout_ms();
    qa.cq = r->cq.get();
    qa.recv_cq = srq && srq->rcq() ? srq->rcq() : r->rcq ? r->rcq.get() : r->cq.get();
    qa.srq = srq ? &srq->queue() : nullptr;
    qa.events = r->events.get();
    int ret = addr ? dom.create_qp(addr, port, qa, &r->qp) : dom.create_qp(qa, *in, &r->qp);
    if (ret) return ret;
    r->peer = peer;
    peer->ref();
    *out = std::move(r);
    return 0;
}

ConnResources::~ConnResources() {
    if (qp) qp->close();
    qp.reset();
    if (srq) srq->unref();  // the queue pair no longer takes receives from it
    if (peer) peer->unref();
}

int Conn::next_event(rpma_conn_event *ev) {
    // The wait is cancellable as the caller has it (common/cancel.h); what follows is not.
    rpma_conn_event e;
    if (!r_->events) {
        if (int ret = r_->qp->next_event(&e)) return ret;
    } else {
        auto popped = r_->events->pop();
        if (!popped) return RPMA_E_NO_EVENT;
        e = *popped;
    }
    CancelOff off;
    if (e == RPMA_CONN_ESTABLISHED) {
        established_.store(true, std::memory_order_release);
        RPMA_LOG_NOTICE("connection established (queue pair %u)", qp_num());
    }
    *ev = e;
    return 0;
}

int Conn::disconnect() {
    int ret = r_->qp->disconnect();
    if (ret == 0) RPMA_LOG_NOTICE("disconnecting (queue pair %u)", qp_num());
    return ret;
}

void Conn::private_data(rpma_conn_private_data *pd) const {
    pd->ptr = nullptr;
    pd->len = 0;
    if (!established_.load(std::memory_order_acquire)) return;
    const auto &v = r_->qp->remote_pdata();
    if (v.empty()) return;
    pd->ptr = const_cast<uint8_t *>(v.data());
    pd->len = static_cast<uint8_t>(v.size());
}

int Conn::wait(int flags, prov::CompletionQueue **cq, bool *is_rcq) {
    if (!r_->shared) return RPMA_E_NOT_SHARED_CHNL;
    for (;;) {
        prov::CompletionQueue *fired = r_->channel->wait();  // cancellable, as next_event's
        if (!fired) return RPMA_E_NO_COMPLETION;
        CancelOff off;
        fired->arm();
        // With WAIT_FOR_COMPLETION a wake-up whose completion was already taken does not count.
        if ((flags & RPMA_W_WAIT_FOR_COMPLETION) && fired->empty()) continue;
        *cq = fired;
        if (is_rcq) *is_rcq = fired == r_->rcq.get();
        return 0;
    }
}

namespace {

[[gnu::cold, gnu::noinline]] bool range_refused(const MrLocal *mr, size_t off, size_t len,
                                                const char *what) {
    RPMA_LOG_ERROR("%s range [%zu, +%zu) outside the local region of %zu bytes", what, off, len,
                   mr->size());
    return false;
}

// Inline: every post checks it; the log is out of line.
inline bool local_range_ok(const MrLocal *mr, size_t off, size_t len, const char *what) {
    return !mr || mr->holds(off, len) || range_refused(mr, off, len, what);
}

// The request's local side, by reference: the provider takes a count only if it keeps it.
inline void set_local(prov::SendWr &wr, const MrLocal *mr, size_t off) {
    if (!mr) return;
    wr.local = mr->at(off);
    wr.local_region = &mr->region();
}

// The bit RPMA_F_COMPLETION_ALWAYS adds to ON_ERROR asks for a completion on success, as
// upstream reads the flags (a failure always completes); other bits mean nothing.
inline bool signaled(int flags) {
    return (flags & (RPMA_F_COMPLETION_ALWAYS & ~RPMA_F_COMPLETION_ON_ERROR)) != 0;
}

}  // namespace

// The NIC would refuse the lkey: a region of another peer (protection domain), or one written
// into without LOCAL_WRITE (a local read needs no particular usage). Logs; always true.
bool Conn::fault_logged(const MrLocal *mr, const char *what) const {
    RPMA_LOG_WARNING(
        "%s: the local region %s; the operation completes with "
        "IBV_WC_LOC_PROT_ERR",
        what,
        mr->peer() != r_->peer ? "belongs to another peer"
                               : "has no usage that allows local writes (READ_DST, WRITE_SRC, "
                                 "WRITE_DST or RECV)");
    return true;
}

[[gnu::cold]] int Conn::not_established() const {
    RPMA_LOG_ERROR(
        "the connection is not established yet: a client posts once rpma_conn_next_event has "
        "returned RPMA_CONN_ESTABLISHED");
    return RPMA_E_PROVIDER;
}

bool Conn::len_refused(size_t len) const {
    RPMA_LOG_ERROR("an operation moves at most %u bytes, not %zu", r_->peer->caps().max_op_length,
                   len);
    return false;
}

int Conn::read(MrLocal *dst, size_t dst_off, const MrRemote *src, size_t src_off, size_t len,
               int flags, uint64_t wr_id) {
    if (!local_range_ok(dst, dst_off, len, "read destination") || !op_len_ok(len))
        return RPMA_E_INVAL;
    prov::SendWr wr;
    wr.op = prov::WrOp::kRead;
    wr.wr_id = wr_id;
    wr.signaled = signaled(flags);
    set_local(wr, dst, dst_off);
    wr.local_fault = local_fault(dst, len, true, "read destination");
    wr.len = static_cast<uint32_t>(len);
    wr.raddr = src ? src->addr() + src_off : 0;
    wr.rkey = src ? src->rkey() : 0;
    return post(std::move(wr));
}

int Conn::write(const MrRemote *dst, size_t dst_off, const MrLocal *src, size_t src_off, size_t len,
                int flags, uint64_t wr_id, const uint32_t *imm) {
    if (!local_range_ok(src, src_off, len, "write source") || !op_len_ok(len)) return RPMA_E_INVAL;
    prov::SendWr wr;
    wr.op = imm ? prov::WrOp::kWriteImm : prov::WrOp::kWrite;
    wr.wr_id = wr_id;
    wr.signaled = signaled(flags);
    set_local(wr, src, src_off);
    wr.local_fault = local_fault(src, len, false, "write source");
    wr.len = static_cast<uint32_t>(len);
    wr.raddr = dst ? dst->addr() + dst_off : 0;
    wr.rkey = dst ? dst->rkey() : 0;
    wr.imm = imm ? *imm : 0;
    return post(std::move(wr));
}

// An atomic write stores one naturally aligned 8-byte word: src[8] of rpma_atomic_write.
static_assert(sizeof(prov::SendWr::value) == RPMA_ATOMIC_WRITE_ALIGNMENT);

int Conn::atomic_write(const MrRemote *dst, size_t dst_off, const char src[8], int flags,
                       uint64_t wr_id) {
    prov::SendWr wr;
    wr.op = prov::WrOp::kAtomicWrite;
    wr.wr_id = wr_id;
    wr.signaled = signaled(flags);
    wr.len = sizeof(wr.value);
    wr.raddr = dst->addr() + dst_off;
    wr.rkey = dst->rkey();
    std::memcpy(&wr.value, src, sizeof(wr.value));
    return post(std::move(wr));
}

int Conn::flush(const MrRemote *dst, size_t dst_off, size_t len, rpma_flush_type type, int flags,
                uint64_t wr_id) {
    if (type == RPMA_FLUSH_TYPE_PERSISTENT && !direct_write_to_pmem_) {
        RPMA_LOG_ERROR(
            "PERSISTENT flush needs a remote peer cfg with direct_write_to_pmem "
            "(rpma_conn_apply_remote_peer_cfg)");
        return RPMA_E_NOSUPP;
    }
    int need = type == RPMA_FLUSH_TYPE_PERSISTENT ? RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT
                                                  : RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;
    if (!(dst->usage() & need)) {
        RPMA_LOG_ERROR("the remote region was not registered for this flush type");
        return RPMA_E_NOSUPP;
    }
    // A flush moves no data, so no length is refused (upstream checks none): one longer than
    // the request's field asks for the rest of the region (prov::kFlushToEnd).
    prov::SendWr wr;
    wr.op = prov::WrOp::kFlush;
    wr.wr_id = wr_id;
    wr.signaled = signaled(flags);
    wr.len = len < prov::kFlushToEnd ? static_cast<uint32_t>(len) : prov::kFlushToEnd;
    wr.raddr = dst->addr() + dst_off;
    wr.rkey = dst->rkey();
    wr.persistent = type == RPMA_FLUSH_TYPE_PERSISTENT;
    return post(std::move(wr));
}

int Conn::send(const MrLocal *src, size_t off, size_t len, int flags, uint64_t wr_id,
               const uint32_t *imm) {
    if (!local_range_ok(src, off, len, "send source") || !op_len_ok(len)) return RPMA_E_INVAL;
    prov::SendWr wr;
    wr.op = imm ? prov::WrOp::kSendImm : prov::WrOp::kSend;
    wr.wr_id = wr_id;
    wr.signaled = signaled(flags);
    set_local(wr, src, off);
    wr.local_fault = local_fault(src, len, false, "send source");
    wr.len = static_cast<uint32_t>(len);
    wr.imm = imm ? *imm : 0;
    return post(std::move(wr));
}

int Conn::recv(MrLocal *dst, size_t off, size_t len, uint64_t wr_id) {
    prov::RecvWr r;
    int ret = make_recv(r_->peer, dst, off, len, wr_id, &r);
    return ret ? ret : r_->qp->post_recv(std::move(r));
}

}  // namespace rpma
