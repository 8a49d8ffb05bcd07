// The completer: answers (ACK, NAK, read data) and the peer's piggybacked acknowledgements
// complete outstanding requests in order; the error state flushes the rest.
#include <arpa/inet.h>
#include <sys/socket.h>

#include "common/log.h"
#include "provider/rc/opcode.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/queue_pair.h"

namespace rpma::rc {

void QueuePair::push_send_wc(const Outstanding &o, ibv_wc_status st) {
    if (st == IBV_WC_SUCCESS && !o.signaled) return;
    const OpInfo &info = op_info(o.op);
    ibv_wc wc{};
    wc.wr_id = o.wr_id;
    wc.status = st;
    wc.opcode = info.wc;
    if (st == IBV_WC_SUCCESS) {  // as rxe: an error completion leaves them 0
        wc.byte_len = info.wc_len ? info.wc_len : o.len;
        if (info.wc_imm) wc.wc_flags = IBV_WC_WITH_IMM;
    }
    wc.qp_num = qp_num_;
    wc.src_qp = remote_qp_;
    cfg_.cq->push(wc);
}

void QueuePair::push_recv_wc(const prov::RecvWr &r, ibv_wc_status st, ibv_wc_opcode op,
                             uint32_t len, bool with_imm, uint32_t imm) {
    ibv_wc wc{};
    wc.wr_id = r.wr_id;
    wc.status = st;
    wc.opcode = op;
    wc.byte_len = len;
    wc.qp_num = qp_num_;
    wc.src_qp = remote_qp_;
    if (with_imm) {
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = htonl(imm);
    }
    cfg_.recv_cq->push(wc);
}

void QueuePair::complete_front(ibv_wc_status st) {
    Outstanding o = std::move(outstanding_.front());
    outstanding_.pop_front();
    if (st == IBV_WC_SUCCESS && (o.local_error || source_faulted(o.seq))) {
        // the NIC's local protection error: this request fails, and the QP with it
        push_send_wc(o, IBV_WC_LOC_PROT_ERR);
        flush_all_locked();
        return;
    }
    if (o.signaled)
        unreclaimed_ = 0;
    else
        ++unreclaimed_;
    push_send_wc(o, st);
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

void QueuePair::advance_locked() {
    // Reads complete only with their data, and everything after them waits (in order).
    while (!outstanding_.empty() && outstanding_.front().seq <= peer_acked_ &&
           !outstanding_.front().awaits_data())
        complete_front(IBV_WC_SUCCESS);
}

QueuePair::Step QueuePair::apply_peer_ack(uint64_t ack) {
    if (ack <= ack_applied_.load(std::memory_order_relaxed)) return Step::kContinue;
    std::lock_guard lk(sq_mu_);
    if (ack >= next_seq_) {
        RPMA_LOG_ERROR("acknowledgement of request %llu that was never sent",
                       static_cast<unsigned long long>(ack));
        resp().why = "protocol error: acknowledgement of a request never sent";
        return Step::kFatal;
    }
    if (error_) return Step::kContinue;
    peer_acked_ = std::max(peer_acked_, ack);
    advance_locked();
    if (!outstanding_.empty() && outstanding_.front().seq <= ack) {
        // A read the peer answered before this request is still on its way (the other
        // stream): this request waits for it, or its effects would overtake that completion.
        resp_wait_ack_.store(true);
        return Step::kStall;
    }
    ack_applied_.store(ack, std::memory_order_relaxed);
    return Step::kContinue;
}

void QueuePair::wake_ack_waiter_locked() {
    // the responder waits while a read the peer acknowledged has not completed here
    bool caught_up = outstanding_.empty() || outstanding_.front().seq > peer_acked_;
    if (caught_up && resp_wait_ack_.load() && resp_wait_ack_.exchange(false)) resume_responder();
}

void QueuePair::flush_all_locked() {
    error_ = true;
    while (!outstanding_.empty()) complete_front(IBV_WC_WR_FLUSH_ERR);
    unreclaimed_ = 0;
    for (auto &r : rq_.drain()) push_recv_wc(r, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0);
    // a request waiting for a read's completion waits no more: there is nothing to order after
    if (resp_wait_ack_.exchange(false)) resume_responder();
}

// The completer runs one answer header through the states of rxe_comp (rxe_comp.c).
QueuePair::Step QueuePair::completer_header(Stream &s, const FrameHeader &h) {
    CompCtx c{s, h, static_cast<Op>(h.op), Step::kContinue};
    CompState st = CompState::kGetAnswer;
    std::unique_lock<RankedMutex> lk(sq_mu_, std::defer_lock);
    while (st != CompState::kDone) {
        if (st == CompState::kCheckSeq) lk.lock();  // from here on the send queue is read
        st = completer_step(c, st);
    }
    return c.result;
}

// Inlined into the loop above, as the responder's steps.
[[gnu::always_inline]] inline QueuePair::CompState QueuePair::completer_step(CompCtx &c,
                                                                             CompState st) {
    const FrameHeader &h = c.h;
    uint64_t seq = h.aux;
    switch (st) {
        case CompState::kGetAnswer:
            if (c.op == Op::kDisconnect) {
                c.s.disc_rx = true;
                c.result = Step::kStop;
                return CompState::kDone;
            }
            if (c.op == Op::kAck || c.op == Op::kReadResp || c.op == Op::kNak)
                return CompState::kCheckSeq;
            RPMA_LOG_ERROR("unexpected opcode %u on the answer stream", h.op);
            return comp_fatal(c, "protocol error: unexpected opcode on the answer stream");
        case CompState::kCheckSeq:
            if (seq != 0 && seq < next_seq_ && h.length <= kMaxOpLength)
                return CompState::kCheckState;
            RPMA_LOG_ERROR("answer for request %llu that was never sent",
                           static_cast<unsigned long long>(seq));
            return comp_fatal(c, "protocol error: answer for a request never sent");
        case CompState::kCheckState:
            // flushed already; only a read's data must still be skipped
            if (!error_) return CompState::kCompleteBefore;
            if (c.op == Op::kReadResp) skip_read_data(c);
            return CompState::kDone;
        case CompState::kCompleteBefore:
            return complete_before(c);
        case CompState::kCheckAck:
            if (c.op != Op::kAck) return CompState::kCheckOrder;
            wake_ack_waiter_locked();
            return CompState::kDone;
        case CompState::kCheckOrder:
            if (error_) return CompState::kDone;  // a local error above flushed the rest
            if (!outstanding_.empty() && outstanding_.front().seq == seq)
                return c.op == Op::kNak ? CompState::kNak : CompState::kReadData;
            return comp_fatal(c, "protocol error: answer out of order");
        case CompState::kNak:
            complete_front(nak_to_status(h.status));
            flush_all_locked();
            return CompState::kDone;
        case CompState::kReadData:
            return read_data(c);
        case CompState::kDone:
            break;
    }
    return CompState::kDone;
}

QueuePair::CompState QueuePair::comp_fatal(CompCtx &c, const char *why) {
    c.s.why = why;
    c.result = Step::kFatal;
    return CompState::kDone;
}

void QueuePair::skip_read_data(CompCtx &c) {
    c.s.payload = Payload::kDiscard;
    c.s.remaining = c.s.payload_len = c.h.length;
}

// Everything before an answer is done: RC executes in order (an ACK covers its own request).
QueuePair::CompState QueuePair::complete_before(CompCtx &c) {
    uint64_t upto = c.op == Op::kAck ? c.h.aux : c.h.aux - 1;
    peer_acked_ = std::max(peer_acked_, upto);
    while (!outstanding_.empty() && outstanding_.front().seq <= upto) {
        if (outstanding_.front().awaits_data()) {
            RPMA_LOG_ERROR("a read was acknowledged without its data");
            return comp_fatal(c, "protocol error: a read acknowledged without its data");
        }
        complete_front(IBV_WC_SUCCESS);
    }
    return CompState::kCheckAck;
}

QueuePair::CompState QueuePair::read_data(CompCtx &c) {
    Outstanding &o = outstanding_.front();
    if (!o.awaits_data() || c.h.length != o.len) {
        RPMA_LOG_ERROR("read answer does not match the request");
        return comp_fatal(c, "protocol error: read answer does not match the request");
    }
    c.s.payload = Payload::kReadResp;
    c.s.dst = o.dst;
    c.s.dst_region = o.dst_region;
    c.s.remaining = c.s.payload_len = c.h.length;
    return CompState::kDone;
}

}  // namespace rpma::rc
