// The completer: answers (ACK, NAK, read data) and the peer's piggybacked acknowledgements
// complete outstanding requests in order; the error state flushes the rest.
#include <arpa/inet.h>
#include <sys/socket.h>

#include "common/log.h"
#include "provider/tcp/opcode.h"
#include "provider/tcp/qp_internal.h"
#include "provider/tcp/queue_pair.h"

namespace rpma::tcp {

void QueuePair::push_send_wc(const Outstanding &o, ibv_wc_status st, uint32_t len) {
    if (st == IBV_WC_SUCCESS && !o.signaled) return;
    ibv_wc wc{};
    wc.wr_id = o.wr_id;
    wc.status = st;
    wc.opcode = op_info(o.op).wc;
    wc.byte_len = (st == IBV_WC_SUCCESS && o.op == Op::kRead) ? len : 0;
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

void QueuePair::complete_front(ibv_wc_status st, uint32_t len) {
    Outstanding o = std::move(outstanding_.front());
    outstanding_.pop_front();
    if (st == IBV_WC_SUCCESS && (o.local_error || source_faulted(o.seq))) {
        // the NIC's local protection error: this request fails, and the QP with it
        push_send_wc(o, IBV_WC_LOC_PROT_ERR, 0);
        flush_all_locked();
        return;
    }
    if (o.signaled)
        unreclaimed_ = 0;
    else
        ++unreclaimed_;
    push_send_wc(o, st, len);
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
        complete_front(IBV_WC_SUCCESS, 0);
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
    while (!outstanding_.empty()) complete_front(IBV_WC_WR_FLUSH_ERR, 0);
    unreclaimed_ = 0;
    for (auto &r : rq_.drain()) push_recv_wc(r, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0);
    // a request waiting for a read's completion waits no more: there is nothing to order after
    if (resp_wait_ack_.exchange(false)) resume_responder();
}

QueuePair::Step QueuePair::completer_header(Stream &s, const FrameHeader &h) {
    Op op = static_cast<Op>(h.op);
    if (op == Op::kDisconnect) {
        s.disc_rx = true;
        return Step::kStop;
    }
    if (op != Op::kAck && op != Op::kReadResp && op != Op::kNak) {
        RPMA_LOG_ERROR("unexpected opcode %u on the answer stream", h.op);
        s.why = "protocol error: unexpected opcode on the answer stream";
        return Step::kFatal;
    }
    std::lock_guard lk(sq_mu_);
    uint64_t seq = h.aux;
    if (seq == 0 || seq >= next_seq_ || h.length > kMaxOpLength) {
        RPMA_LOG_ERROR("answer for request %llu that was never sent",
                       static_cast<unsigned long long>(seq));
        s.why = "protocol error: answer for a request never sent";
        return Step::kFatal;
    }
    if (error_) {
        // flushed already; only a read's data must still be skipped
        if (op == Op::kReadResp) {
            s.payload = Payload::kDiscard;
            s.remaining = s.payload_len = h.length;
        }
        return Step::kContinue;
    }
    // Everything before an answer is done: RC executes in order.
    uint64_t upto = op == Op::kAck ? seq : seq - 1;
    peer_acked_ = std::max(peer_acked_, upto);
    while (!outstanding_.empty() && outstanding_.front().seq <= upto) {
        if (outstanding_.front().awaits_data()) {
            RPMA_LOG_ERROR("a read was acknowledged without its data");
            s.why = "protocol error: a read acknowledged without its data";
            return Step::kFatal;
        }
        complete_front(IBV_WC_SUCCESS, 0);
    }
    if (op == Op::kAck) {
        wake_ack_waiter_locked();
        return Step::kContinue;
    }
    if (error_) return Step::kContinue;  // a local error above flushed the rest
    if (outstanding_.empty() || outstanding_.front().seq != seq) {
        s.why = "protocol error: answer out of order";
        return Step::kFatal;
    }
    if (op == Op::kNak) {
        complete_front(nak_to_status(h.status), 0);
        flush_all_locked();
        return Step::kContinue;
    }
    Outstanding &o = outstanding_.front();
    if (!o.awaits_data() || h.length != o.len) {
        RPMA_LOG_ERROR("read answer does not match the request");
        s.why = "protocol error: read answer does not match the request";
        return Step::kFatal;
    }
    s.payload = Payload::kReadResp;
    s.dst = o.dst;
    s.dst_region = o.dst_region;
    s.remaining = s.payload_len = h.length;
    return Step::kContinue;
}

}  // namespace rpma::tcp
