// The responder: the peer's requests are checked and executed against registered memory
// (engine thread, or a thread driving the stream), and answered.
#include <sys/socket.h>

#include "common/log.h"
#include "provider/soft/mr_table.h"
#include "provider/tcp/opcode.h"
#include "provider/tcp/persist.h"
#include "provider/tcp/qp_internal.h"
#include "provider/tcp/queue_pair.h"

namespace rpma::tcp {

void QueuePair::nak(uint64_t seq, NakStatus st) {
    FrameHeader h{};
    h.op = static_cast<uint8_t>(Op::kNak);
    h.status = static_cast<uint16_t>(st);
    h.aux = seq;
    resp_acked_ = seq;
    resp_error_ = true;
    send_frame(resp(), h);
    // The responder's QP goes to the error state too, as an RC QP does.
    std::lock_guard lk(sq_mu_);
    flush_all_locked();
}

// The responder's steps for one request header, as rxe_resp's states: check the opcode and
// length, apply the peer's piggybacked ACK, drop it in the error state, wait for our earlier
// answers, then check resources (a receive) and access (rkey, range, usage) and execute.
QueuePair::Step QueuePair::responder_header(Stream &s, const FrameHeader &h) {
    if (!is_request(h.op)) {
        if (h.op == static_cast<uint8_t>(Op::kDisconnect)) {
            s.disc_rx = true;
            return Step::kStop;
        }
        RPMA_LOG_ERROR("unexpected opcode %u on the request stream", h.op);
        s.why = "protocol error: unexpected opcode";
        return Step::kFatal;
    }
    if (h.length > kMaxOpLength) {
        RPMA_LOG_ERROR("request of %u bytes exceeds the limit", h.length);
        s.why = "protocol error: oversized request";
        return Step::kFatal;
    }
    // The peer's acknowledgement first: its request may react to a completion of ours.
    if (Step st = apply_peer_ack(h.ack); st != Step::kContinue) return st;
    absorb_queued_nak();
    // In the error state requests are dropped; the stream is read on to its disconnect.
    if (resp_error_) return discard_payload(s, h);
    // Reads answered earlier must not see what this request changes, and a peer that does not
    // read its answers must not make us queue more.
    Op op = static_cast<Op>(h.op);
    if (Step st = wait_for_answers(op_info(op).modifies); st != Step::kContinue) return st;
    if (absorb_queued_nak()) return discard_payload(s, h);
    uint64_t seq = resp_seq_ + 1;
    switch (op) {
        case Op::kWrite:
        case Op::kWriteImm:
            return execute_write(s, h, seq);
        case Op::kSend:
        case Op::kSendImm:
            return execute_send(s, h, seq);
        case Op::kRead:
            return execute_read(h, seq);
        case Op::kAtomicWrite:
            return execute_atomic_write(h, seq);
        default:
            return execute_flush(h, seq);
    }
}

QueuePair::Step QueuePair::discard_payload(Stream &s, const FrameHeader &h) {
    if (op_info(static_cast<Op>(h.op)).payload) {
        s.payload = Payload::kDiscard;
        s.remaining = s.payload_len = h.length;
    }
    return Step::kContinue;
}

bool QueuePair::access_ok(const FrameHeader &h, std::shared_ptr<Region> *region) const {
    if (h.length == 0 && static_cast<Op>(h.op) != Op::kAtomicWrite) return true;  // touches nothing
    *region = mrs_->find(h.rkey);
    return *region && ((*region)->usage() & required_usage(h)) &&
           (*region)->contains(h.addr, h.length);
}

bool QueuePair::take_recv() {
    RecvQueue *q = cfg_.srq ? cfg_.srq : &rq_;
    cur_recv_ = q->take_or_wait(weak_from_this());
    return cur_recv_.has_value();
}

QueuePair::Step QueuePair::execute_write(Stream &s, const FrameHeader &h, uint64_t seq) {
    std::shared_ptr<Region> region;
    if (!access_ok(h, &region)) {
        nak(seq, NakStatus::kAccess);
        return discard_payload(s, h);
    }
    bool imm = static_cast<Op>(h.op) == Op::kWriteImm;
    if (imm) {
        if (!take_recv()) return Step::kStall;  // RNR: resumed when a receive is posted
        cur_imm_ = h.imm;
        cur_has_imm_ = true;
    }
    // executed, and so acknowledged, once the payload is placed
    pending_seq_ = seq;
    pending_wants_ack_ = h.flags & kAckRequested;
    s.payload = imm ? Payload::kWriteImm : Payload::kWrite;
    s.dst = region ? reinterpret_cast<char *>(h.addr) : nullptr;
    s.dst_region = region;
    s.remaining = s.payload_len = h.length;
    return Step::kContinue;
}

QueuePair::Step QueuePair::execute_send(Stream &s, const FrameHeader &h, uint64_t seq) {
    if (!take_recv()) return Step::kStall;  // RNR: resumed when a receive is posted
    pending_seq_ = seq;
    pending_wants_ack_ = h.flags & kAckRequested;
    cur_has_imm_ = static_cast<Op>(h.op) == Op::kSendImm;
    cur_imm_ = h.imm;
    if (h.length > cur_recv_->len) {
        RPMA_LOG_WARNING("message of %u bytes for a receive buffer of %u", h.length,
                         cur_recv_->len);
        fail_recv(IBV_WC_LOC_LEN_ERR);
        nak(seq, NakStatus::kInvalidRequest);
        return discard_payload(s, h);
    }
    s.payload = Payload::kSend;
    s.dst = cur_recv_->ptr;
    s.dst_region = std::static_pointer_cast<Region>(cur_recv_->region);  // the domain's
    s.failed = !cur_recv_->usable;  // checked as a NIC checks the lkey: on arrival
    s.remaining = s.payload_len = h.length;
    return Step::kContinue;
}

QueuePair::Step QueuePair::execute_read(const FrameHeader &h, uint64_t seq) {
    std::shared_ptr<Region> region;
    if (!access_ok(h, &region)) {
        nak(seq, NakStatus::kAccess);
        return Step::kContinue;
    }
    resp_seq_ = seq;
    resp_acked_ = seq;
    FrameHeader r{};
    r.op = static_cast<uint8_t>(Op::kReadResp);
    r.length = h.length;
    r.aux = seq;
    Stream &out = resp();
    std::lock_guard lk(out.mu);
    // zero-copy: the answer is gathered from the region when the socket takes it
    enqueue(out, TxItem{r, h.length ? reinterpret_cast<char *>(h.addr) : nullptr, h.length,
                        h.length ? region : nullptr});
    if (out.txq.size() >= kAnswersPerSend && !flush_tx(out)) return Step::kFatal;
    return Step::kContinue;
}

QueuePair::Step QueuePair::execute_atomic_write(const FrameHeader &h, uint64_t seq) {
    bool shaped = h.length == sizeof(uint64_t) && h.addr % RPMA_ATOMIC_WRITE_ALIGNMENT == 0;
    std::shared_ptr<Region> region;
    if (!shaped || !access_ok(h, &region)) {
        nak(seq, shaped ? NakStatus::kAccess : NakStatus::kInvalidRequest);
        return Step::kContinue;
    }
    RegionUse use(region.get());
    if (!use.ok()) {
        nak(seq, NakStatus::kAccess);
        return Step::kContinue;
    }
    // one aligned 8-byte store: a concurrent reader sees the old or the new value
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(h.addr))
        .store(h.aux, std::memory_order_release);
    resp_seq_ = seq;
    ack_wanted_ |= (h.flags & kAckRequested) != 0;
    return Step::kContinue;
}

QueuePair::Step QueuePair::execute_flush(const FrameHeader &h, uint64_t seq) {
    std::shared_ptr<Region> region;
    if (!access_ok(h, &region)) {
        nak(seq, NakStatus::kAccess);
        return Step::kContinue;
    }
    if ((h.flags & kFlushPersistent) && h.length) {
        RegionUse use(region.get());
        if (!use.ok() || persist_range(reinterpret_cast<char *>(h.addr), h.length) != 0) {
            nak(seq, NakStatus::kOperation);
            return Step::kContinue;
        }
    }
    resp_seq_ = seq;
    ack_wanted_ |= (h.flags & kAckRequested) != 0;
    return Step::kContinue;
}

void QueuePair::payload_done(Stream &s) {
    Payload p = s.payload;
    bool failed = s.failed;
    s.payload = Payload::kNone;
    s.rx = Rx::kHeader;
    s.dst = nullptr;
    s.dst_region.reset();
    s.failed = false;
    uint32_t len = static_cast<uint32_t>(s.payload_len);
    switch (p) {
        case Payload::kWrite:
        case Payload::kWriteImm:
        case Payload::kSend: {
            if (failed) {
                // Not all of it was placed (region deregistered, or a receive buffer it may not
                // use): the receive fails here, and the requester hears it was not done.
                RPMA_LOG_WARNING("%s", p == Payload::kSend ? "receive buffer not usable"
                                                           : "write target deregistered mid-write");
                fail_recv(p == Payload::kSend ? IBV_WC_LOC_PROT_ERR : IBV_WC_WR_FLUSH_ERR);
                nak(pending_seq_, p == Payload::kSend ? NakStatus::kOperation : NakStatus::kAccess);
                break;
            }
            // Executed: the ACK state moves before the application can see the receive, so
            // anything it posts in reaction carries this acknowledgement.
            resp_seq_.store(pending_seq_, std::memory_order_release);
            ack_wanted_ |= pending_wants_ack_;
            if (cur_recv_) {
                ibv_wc_opcode op = p == Payload::kSend ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM;
                push_recv_wc(*cur_recv_, IBV_WC_SUCCESS, op, len, cur_has_imm_, cur_imm_);
                cur_recv_.reset();
            }
            break;
        }
        case Payload::kReadResp: {
            std::lock_guard lk(sq_mu_);
            if (error_ || outstanding_.empty()) break;
            if (failed) {
                complete_front(IBV_WC_LOC_PROT_ERR, 0);  // its destination was deregistered
                flush_all_locked();
                break;
            }
            complete_front(IBV_WC_SUCCESS, len);
            advance_locked();  // what the peer acknowledged behind this read
            wake_ack_waiter_locked();
            break;
        }
        default:
            break;
    }
}

void QueuePair::resume_responder() {
    engine_->post([w = weak_from_this()] {
        auto self = w.lock();
        if (self && !self->closed_) self->resume_now();
    });
}

void QueuePair::resume_now() {
    if (!established()) return;
    Stream &s = resp();
    std::lock_guard rl(s.rx_mu);
    {
        std::lock_guard lk(s.mu);
        if (!s.stalled) return;
        s.stalled = false;
        s.drain_wait = false;
        update_mask(s);
    }
    read_stream(s);
}

void QueuePair::fail_recv(ibv_wc_status st) {
    if (!cur_recv_) return;
    // The error state first: whatever the application posts once it sees this is flushed.
    std::lock_guard lk(sq_mu_);
    error_ = true;
    push_recv_wc(*cur_recv_, st, IBV_WC_RECV, 0, false, 0);
    cur_recv_.reset();
}

void QueuePair::recv_posted() {
    resume_responder();
}

bool QueuePair::answers_block(const Stream &s, bool modifies) noexcept {
    return s.txq.size() >= kMaxQueuedAnswers || (modifies && s.data_items > 0);
}

bool QueuePair::take_drained(Stream &s) noexcept {
    if (!s.drain_wait || answers_block(s, true)) return false;
    s.drain_wait = false;
    return true;
}

bool QueuePair::absorb_queued_nak() {
    // flush_tx turned a read answer into a NAK (its region was deregistered): the responder
    // enters the error state, as after any NAK. Engine thread: the answer stream's own.
    if (!std::exchange(resp().nak_queued, false)) return false;
    resp_error_ = true;
    std::lock_guard lk(sq_mu_);
    flush_all_locked();
    return true;
}

QueuePair::Step QueuePair::wait_for_answers(bool modifies) {
    Stream &s = resp();
    // The answer queue changes on the engine thread only, which runs this: no lock to look.
    if (!answers_block(s, modifies)) return Step::kContinue;
    if (!answer_now(s)) return Step::kFatal;
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

}  // namespace rpma::tcp
