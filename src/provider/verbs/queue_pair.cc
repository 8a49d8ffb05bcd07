#include "provider/verbs/queue_pair.h"

#include <arpa/inet.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/fd.h"
#include "common/log.h"
#include "provider/verbs/cm_event.h"
#include "provider/verbs/completion_queue.h"
#include "provider/verbs/domain.h"
#include "provider/verbs/shared_recv_queue.h"

namespace rpma::verbs {

namespace {

// Scatter entries per request: rpma moves one buffer per operation.
constexpr uint32_t kMaxSge = 1;
// An atomic write is emulated by an 8-byte inline write.
constexpr uint32_t kMaxInline = 8;
// A flush is emulated by reading this many bytes back (read after write).
constexpr uint32_t kFlushReadLen = 8;

rdma_conn_param conn_param(const void *pdata, uint8_t len) {
    rdma_conn_param p{};
    p.private_data = pdata;
    p.private_data_len = len;
    p.responder_resources = RDMA_MAX_RESP_RES;
    p.initiator_depth = RDMA_MAX_INIT_DEPTH;
    p.flow_control = 1;
    p.retry_count = 7;      // the largest 3-bit values: ride out what the fabric allows
    p.rnr_retry_count = 7;  // 7 = retry for ever while the peer has no receive posted
    return p;
}

const char *op_name(prov::WrOp op) {
    switch (op) {
        case prov::WrOp::kWrite:
            return "write";
        case prov::WrOp::kWriteImm:
            return "write with immediate data";
        case prov::WrOp::kRead:
            return "read";
        case prov::WrOp::kAtomicWrite:
            return "atomic write";
        case prov::WrOp::kFlush:
            return "flush";
        case prov::WrOp::kSend:
            return "send";
        case prov::WrOp::kSendImm:
            return "send with immediate data";
    }
    return "?";
}

// The post path's failures, logged out of line: RPMA_E_PROVIDER.
[[gnu::cold]] int foreign_post() {
    RPMA_LOG_ERROR("the connection belongs to the parent process");
    return RPMA_E_PROVIDER;
}

[[gnu::cold]] int send_failed(const ibv_send_wr &wr, prov::WrOp op, int err) {
    RPMA_LOG_ERROR("ibv_post_send(%s, %u bytes): %s%s", op_name(op),
                   wr.num_sge ? wr.sg_list->length : 0, std::strerror(err),
                   err == ENOMEM ? " (the send queue is full)" : "");
    return RPMA_E_PROVIDER;
}

}  // namespace

QueuePair::QueuePair(Domain &dom) noexcept : dom_(dom), pid_(::getpid()) {}

int QueuePair::create_active(Domain &dom, const char *addr, const char *port,
                             const prov::QpAttr &attr, std::shared_ptr<prov::QueuePair> *out) {
    rdma_addrinfo hints{};
    hints.ai_port_space = RDMA_PS_TCP;
    rdma_addrinfo *ai = nullptr;
    if (rdma_getaddrinfo(addr, port, &hints, &ai) != 0) {
        RPMA_LOG_ERROR("cannot resolve %s:%s: %s", addr, port, std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    std::shared_ptr<QueuePair> qp(new QueuePair(dom));
    // A synchronous id: the resolutions below wait for their own events.
    int err = 0;
    const char *what = "";
    if (rdma_create_id(nullptr, &qp->id_, nullptr, RDMA_PS_TCP) != 0) {
        err = errno, what = "rdma_create_id";
        qp->id_ = nullptr;
    } else if (rdma_resolve_addr(qp->id_, ai->ai_src_addr, ai->ai_dst_addr, attr.timeout_ms)) {
        err = errno, what = "rdma_resolve_addr";
    } else if (rdma_resolve_route(qp->id_, attr.timeout_ms) != 0) {
        err = errno, what = "rdma_resolve_route";
    }
    rdma_freeaddrinfo(ai);
    if (err) {
        RPMA_LOG_ERROR("cannot reach %s:%s: %s: %s", addr, port, what, std::strerror(err));
        return RPMA_E_PROVIDER;
    }
    if (int ret = qp->setup(attr)) return ret;
    *out = std::move(qp);
    return 0;
}

int QueuePair::create_passive(Domain &dom, const prov::QpAttr &attr, ConnectRequest &req,
                              std::shared_ptr<prov::QueuePair> *out) {
    std::shared_ptr<QueuePair> qp(new QueuePair(dom));
    qp->passive_ = true;
    qp->id_ = req.release();
    qp->unanswered_ = true;
    if (int ret = qp->setup(attr)) return ret;
    *out = std::move(qp);
    return 0;
}

int QueuePair::setup(const prov::QpAttr &attr) {
    ibv_qp_init_attr_ex ia{};
    ia.send_cq = static_cast<CompletionQueue *>(attr.cq)->raw();
    ia.recv_cq = static_cast<CompletionQueue *>(attr.recv_cq)->raw();
    ia.srq = attr.srq ? static_cast<SharedRecvQueue *>(attr.srq)->raw() : nullptr;
    ia.cap.max_send_wr = attr.sq_size;
    ia.cap.max_recv_wr = attr.rq_size;
    ia.cap.max_send_sge = kMaxSge;
    ia.cap.max_recv_sge = kMaxSge;
    ia.cap.max_inline_data = kMaxInline;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 0;  // each request says whether it wants a completion
    ia.comp_mask = IBV_QP_INIT_ATTR_PD;
    ia.pd = dom_.pd();
    if (rdma_create_qp_ex(id_, &ia) != 0) {
        RPMA_LOG_ERROR("rdma_create_qp_ex(send %u, receive %u%s): %s", attr.sq_size, attr.rq_size,
                       ia.srq ? ", shared receive queue" : "", std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    long page = ::sysconf(_SC_PAGESIZE);
    void *p = ::mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return RPMA_E_NOMEM;
    flush_page_ = p;
    ibv_mr *mr = ibv_reg_mr(dom_.pd(), p, kFlushReadLen, static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
    if (!mr) {
        RPMA_LOG_ERROR("ibv_reg_mr(the flush's read target): %s", std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    flush_target_ = std::make_unique<Region>(mr, RPMA_MR_USAGE_READ_DST);
    // A channel per connection, as upstream: its fd is what rpma_conn_get_event_fd hands out,
    // blocking until the application says otherwise.
    ch_ = rdma_create_event_channel();
    if (!ch_) {
        RPMA_LOG_ERROR("rdma_create_event_channel: %s", std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    if (rdma_migrate_id(id_, ch_) != 0) {
        RPMA_LOG_ERROR("rdma_migrate_id: %s", std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    return 0;
}

QueuePair::~QueuePair() {
    close();
}

uint32_t QueuePair::qp_num() const noexcept {
    return id_ && id_->qp ? id_->qp->qp_num : 0;
}

int QueuePair::connect(const void *pdata, uint8_t pdata_len) {
    rdma_conn_param p = conn_param(pdata, pdata_len);
    if (rdma_connect(id_, &p) != 0) {
        RPMA_LOG_ERROR("rdma_connect: %s", std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    return 0;
}

int QueuePair::accept(std::unique_ptr<prov::IncomingRequest> req, const void *pdata,
                      uint8_t pdata_len) {
    // the request's bytes, where rpma_conn_req_get_private_data showed them, are the
    // connection's now (the domain made every request it is handed back)
    remote_pdata_ = static_cast<ConnectRequest &>(*req).take_private_data();
    rdma_conn_param p = conn_param(pdata, pdata_len);
    if (rdma_accept(id_, &p) != 0) {
        RPMA_LOG_ERROR("rdma_accept: %s", std::strerror(errno));
        return RPMA_E_PROVIDER;  // close() still rejects it
    }
    unanswered_ = false;
    return 0;
}

int QueuePair::post_send(prov::SendWr &&wr) {
    if (self_pid() != pid_) [[unlikely]]
        return foreign_post();
    ibv_sge sge;
    // Only the fields an RC request reads, as upstream sets them: zeroing all 128 bytes (the
    // memory-window and TSO unions too) cost a loop of stores on every post.
    ibv_send_wr w;
    w.wr_id = wr.wr_id;
    w.next = nullptr;
    w.sg_list = nullptr;
    w.num_sge = 0;
    w.send_flags = wr.signaled ? IBV_SEND_SIGNALED : 0;
    w.imm_data = 0;
    w.wr.rdma.remote_addr = wr.raddr;
    w.wr.rdma.rkey = wr.rkey;
    if (wr.local_region) {
        sge =
            ibv_sge{reinterpret_cast<uintptr_t>(wr.local), wr.len, lkey_of(wr.local_region->get())};
        w.sg_list = &sge;
        w.num_sge = 1;
    }
    switch (wr.op) {
        case prov::WrOp::kWrite:
            w.opcode = IBV_WR_RDMA_WRITE;
            break;
        case prov::WrOp::kWriteImm:
            w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            w.imm_data = htonl(wr.imm);
            break;
        case prov::WrOp::kRead:
            w.opcode = IBV_WR_RDMA_READ;
            break;
        case prov::WrOp::kSend:
            w.opcode = IBV_WR_SEND;
            break;
        case prov::WrOp::kSendImm:
            w.opcode = IBV_WR_SEND_WITH_IMM;
            w.imm_data = htonl(wr.imm);
            break;
        case prov::WrOp::kAtomicWrite:
            // One inline 8-byte write lands whole on the devices rpma targets; the fence keeps it
            // behind an earlier read (a flush), as upstream's emulation does.
            w.opcode = IBV_WR_RDMA_WRITE;
            sge = ibv_sge{reinterpret_cast<uintptr_t>(&wr.value), sizeof(wr.value), 0};
            w.sg_list = &sge;
            w.num_sge = 1;
            w.send_flags |= IBV_SEND_INLINE | IBV_SEND_FENCE;
            break;
        case prov::WrOp::kFlush:
            // Read after write: the read's answer leaves the responder after every earlier
            // write has reached its memory (both flush types; the target decides persistence).
            w.opcode = IBV_WR_RDMA_READ;
            sge = ibv_sge{reinterpret_cast<uintptr_t>(flush_page_), kFlushReadLen,
                          flush_target_->lkey()};
            w.sg_list = &sge;
            w.num_sge = 1;
            break;
    }
    ibv_send_wr *bad = nullptr;
    if (int err = ibv_post_send(id_->qp, &w, &bad)) [[unlikely]]
        return send_failed(w, wr.op, err);
    return 0;
}

int QueuePair::post_recv(prov::RecvWr &&r) {
    if (self_pid() != pid_) [[unlikely]]
        return foreign_post();
    ibv_sge sge;
    ibv_recv_wr wr;
    fill_recv(r, &sge, &wr);
    ibv_recv_wr *bad = nullptr;
    if (int err = ibv_post_recv(id_->qp, &wr, &bad)) [[unlikely]] {
        RPMA_LOG_ERROR("ibv_post_recv: %s%s", std::strerror(err),
                       err == ENOMEM ? " (the receive queue is full)" : "");
        return RPMA_E_PROVIDER;
    }
    return 0;
}

int QueuePair::disconnect() {
    if (rdma_disconnect(id_) != 0) {
        RPMA_LOG_ERROR("rdma_disconnect: %s", std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    return 0;
}

int QueuePair::next_event(rpma_conn_event *out) {
    for (;;) {
        std::optional<rpma_conn_event> e;
        int ret = take_when_readable(ch_->fd, events_mu_, RPMA_E_NO_EVENT, [&] {
            rdma_cm_event *ev = nullptr;
            while (get_cm_event_now(ch_, &ev) != 0) {
                int err = errno;
                if (err == EINTR) continue;
                if (err == EAGAIN || err == EWOULDBLOCK || err == ENODATA) return RPMA_E_NO_EVENT;
                RPMA_LOG_ERROR("rdma_get_cm_event: %s", std::strerror(err));
                return RPMA_E_PROVIDER;
            }
            e = translate(*ev);
            // Acknowledged at once: rdma_destroy_id waits for every event it handed out.
            if (rdma_ack_cm_event(ev) != 0)
                RPMA_LOG_ERROR("rdma_ack_cm_event: %s", std::strerror(errno));
            return 0;
        });
        if (ret) return ret;
        if (e) {
            *out = *e;
            return 0;
        }
        // A dropped event (the second close, TIMEWAIT_EXIT) woke a caller that polled the fd:
        // with nothing else queued it must not block, even on a blocking fd.
        if (!readable_now(ch_->fd)) return RPMA_E_NO_EVENT;
    }
}

std::optional<rpma_conn_event> QueuePair::translate(const rdma_cm_event &ev) {
    // Every end of a connection is told at NOTICE with rdma_cm's own words, as upstream does.
    if (ev.event != RDMA_CM_EVENT_ESTABLISHED)
        RPMA_LOG_NOTICE("connection: rdma_cm %s (status %d%s%s)", rdma_event_str(ev.event),
                        ev.status, ev.status < 0 ? ": " : "",
                        ev.status < 0 ? std::strerror(-ev.status) : "");
    switch (ev.event) {
        case RDMA_CM_EVENT_ESTABLISHED:
            // The server's reply carries the accept's private data (the client's came with the
            // request); set before the event is returned.
            if (!passive_ && ev.param.conn.private_data && ev.param.conn.private_data_len) {
                auto *p = static_cast<const uint8_t *>(ev.param.conn.private_data);
                remote_pdata_.assign(p, p + ev.param.conn.private_data_len);
            }
            return RPMA_CONN_ESTABLISHED;
        case RDMA_CM_EVENT_REJECTED:
            return RPMA_CONN_REJECTED;
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_ADDR_ERROR:
        case RDMA_CM_EVENT_ROUTE_ERROR:
            return RPMA_CONN_UNREACHABLE;
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
            return RPMA_CONN_LOST;
        case RDMA_CM_EVENT_DISCONNECTED:
        case RDMA_CM_EVENT_TIMEWAIT_EXIT:
            if (closed_event_sent_.exchange(true)) return std::nullopt;
            return RPMA_CONN_CLOSED;
        default:
            return std::nullopt;  // rdma_cm's others (ADDR_CHANGE, ...) change nothing rpma reports
    }
}

void QueuePair::close() {
    if (closed_.exchange(true)) return;
    if (::getpid() != pid_) return;  // the parent's verbs objects: left alone
    if (id_) {
        if (unanswered_ && rdma_reject(id_, nullptr, 0) != 0)
            RPMA_LOG_WARNING("rdma_reject: %s", std::strerror(errno));
        if (id_->qp) rdma_destroy_qp(id_);
    }
    flush_target_.reset();
    if (flush_page_) ::munmap(flush_page_, static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
    flush_page_ = nullptr;
    // A connected id sends the peer a disconnect request as it goes: the peer sees CLOSED.
    if (id_ && rdma_destroy_id(id_) != 0)
        RPMA_LOG_ERROR("rdma_destroy_id: %s", std::strerror(errno));
    id_ = nullptr;
    // After the id: events it did not hand out die with the channel.
    if (ch_) rdma_destroy_event_channel(ch_);
    ch_ = nullptr;
}

}  // namespace rpma::verbs
