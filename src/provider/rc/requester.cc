// The requester: posted work requests become frames on our request stream (application
// threads), and receives are posted.
#include <sys/socket.h>

#include "common/log.h"
#include "provider/rc/opcode.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/queue_pair.h"

namespace rpma::rc {

namespace {

// prov::WrOp's order is the opcode order on the wire
constexpr Op to_op(prov::WrOp op) noexcept {
    return static_cast<Op>(static_cast<int>(op) + static_cast<int>(Op::kWrite));
}
static_assert(to_op(prov::WrOp::kSendImm) == Op::kSendImm &&
              to_op(prov::WrOp::kFlush) == Op::kFlush);

}  // namespace

int QueuePair::post_send(prov::SendWr wr) {
    // In a forked child the sockets are the parent's: a frame from here would corrupt its stream.
    if (int ret = engine_->check_process("the connection")) return ret;
    Op op = to_op(wr.op);
    // the domain's regions are all Regions
    auto local_region = std::static_pointer_cast<Region>(std::move(wr.local_region));
    std::unique_lock lk(sq_mu_);
    Cm cm;
    bool disc;
    {
        std::lock_guard clk(cm_mu_);
        cm = cm_;
        disc = disc_sent_;
    }
    if (cm == Cm::kIdle || cm == Cm::kConnecting || cm == Cm::kAwaitReply) {
        RPMA_LOG_ERROR("the connection is not established yet");
        return RPMA_E_PROVIDER;
    }
    if (completer_.error() || cm == Cm::kDone || cm == Cm::kClosing || disc) {
        // as verbs: a QP in the error state takes the request and flushes it
        completer_.flush_post(wr.wr_id, op, wr.signaled);
        return 0;
    }
    if (sq_.outstanding() + completer_.unreclaimed() >= cfg_.sq_size) {
        RPMA_LOG_ERROR(
            "send queue full (%u entries: %zu in flight from #%llu, %u done "
            "unsignaled); signal a completion more often",
            cfg_.sq_size, sq_.outstanding(),
            static_cast<unsigned long long>(sq_.empty() ? 0 : sq_.front().seq),
            completer_.unreclaimed());
        return RPMA_E_PROVIDER;
    }
    bool is_read = op == Op::kRead;
    uint64_t seq = sq_.post(Wqe{0, wr.wr_id, op, wr.signaled, is_read ? wr.local : nullptr, wr.len,
                                is_read ? std::move(local_region) : nullptr, wr.local_fault});
    FrameHeader h{};
    h.op = static_cast<uint8_t>(op);
    h.flags = wr.persistent ? kFlushPersistent : 0;
    // Only signaled requests need a prompt ACK; unsignaled ones ask now and then to free slots.
    if (wr.signaled || ++unsignaled_run_ >= std::max(1u, cfg_.sq_size / 2)) {
        h.flags |= kAckRequested;
        unsignaled_run_ = 0;
    }
    h.imm = wr.imm;
    h.length = wr.len;
    h.rkey = wr.rkey;
    h.addr = wr.raddr;
    h.aux = wr.value;
    bool carries = !wr.local_fault && op_info(op).payload;
    if (wr.local_fault) {
        // An empty write holds the request's place; its ACK completes it with LOC_PROT_ERR.
        h = FrameHeader{};
        h.op = static_cast<uint8_t>(Op::kWrite);
        h.flags = kAckRequested;
    }
    // Everything of the peer's we executed (a receive it reacts to, say) completes at the peer
    // before this request does anything there.
    h.ack = responder_.executed();
    TxItem item{h, carries ? wr.local : nullptr, carries ? wr.len : 0u, nullptr, seq};
    if (carries && wr.len) item.guard = std::move(local_region);
    send_request(lk, std::move(item));
    return 0;
}

void QueuePair::send_request(std::unique_lock<RankedMutex> &sq, TxItem item) {
    Stream &s = req();
    std::lock_guard tlk(s.mu);
    // Frames already queued mean the socket is full and the engine sends on EPOLLOUT, or they
    // are corked; this one joins them (and goes out in the same sendmsg).
    bool idle = s.tx.empty();
    // Corked: many requests are in flight and one whose answer will come has left (the send
    // queue holds a contiguous range of sequence numbers), so the thread that reads that answer
    // sends this frame (finish_read), with every other posted by then, in one sendmsg. Set before
    // sq_mu_ is released: that reader completes the answer under sq_mu_ and then sees it.
    if (idle && sq_.outstanding() >= kCorkDepth && sq_.front().seq <= s.tx.answer_due()) {
        idle = false;
        s.corked.store(true, std::memory_order_release);
    }
    s.tx.push(std::move(item));
    // Queued in sequence order (under sq_mu_); the send itself needs only s.mu, so the
    // completer can take sq_mu_ for the answers that arrive meanwhile instead of sleeping.
    sq.unlock();
    if (idle) flush_tx(s);
}

int QueuePair::post_recv(prov::RecvWr r) {
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

}  // namespace rpma::rc
