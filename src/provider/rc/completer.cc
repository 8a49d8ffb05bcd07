#include "provider/rc/completer.h"

#include <algorithm>
#include <mutex>

#include "common/log.h"
#include "provider/rc/opcode.h"
#include "provider/rc/qp_internal.h"

namespace rpma::rc {

Step Completer::read(ByteStream &io, std::atomic<bool> &disc) {
    // The reader's handler: answers carry no request to run, so nothing goes out before a read.
    struct Answers {
        Completer &c;
        std::atomic<bool> &disc;
        Step header(const FrameHeader &h) { return c.header(h, disc); }
        void placed(Payload p, bool failed, uint32_t) { c.placed(p, failed); }
        bool before_recv() { return true; }
    } h{*this, disc};
    return reader_.read(io, disc, h);
}

void Completer::push_wc(const Wqe &w, ibv_wc_status st) {
    if (st == IBV_WC_SUCCESS && !w.signaled) return;
    const OpInfo &info = op_info(w.op);
    ibv_wc wc{};
    wc.wr_id = w.wr_id;
    wc.status = st;
    wc.opcode = info.wc;
    if (st == IBV_WC_SUCCESS) {  // as rxe: an error completion leaves them 0
        wc.byte_len = info.wc_len ? info.wc_len : w.len;
        if (info.wc_imm) wc.wc_flags = IBV_WC_WITH_IMM;
    }
    wc.qp_num = target_.qp_num;
    wc.src_qp = *target_.remote_qp;
    target_.cq->push(wc);
}

void Completer::flush_post(uint64_t wr_id, Op op, bool signaled) {
    Wqe w;
    w.wr_id = wr_id;
    w.op = op;
    w.signaled = signaled;
    push_wc(w, IBV_WC_WR_FLUSH_ERR);
}

void Completer::complete_front(ibv_wc_status st) {
    Wqe w = sq_.pop();
    if (st == IBV_WC_SUCCESS && (w.local_error || host_.source_faulted(w.seq))) {
        // the NIC's local protection error: this request fails, and the QP with it
        push_wc(w, IBV_WC_LOC_PROT_ERR);
        flush();
        return;
    }
    if (w.signaled)
        unreclaimed_ = 0;
    else
        ++unreclaimed_;
    push_wc(w, st);
}

void Completer::advance() {
    // Reads complete only with their data, and everything after them waits (in order).
    while (!sq_.empty() && sq_.front().seq <= peer_acked_ && !sq_.front().awaits_data())
        complete_front(IBV_WC_SUCCESS);
}

Step Completer::apply_peer_ack(uint64_t ack) {
    if (ack <= ack_applied_.load(std::memory_order_relaxed)) return Step::kContinue;
    std::lock_guard lk(sq_mu_);
    if (ack > sq_.posted()) {
        RPMA_LOG_ERROR("acknowledgement of request %llu that was never sent",
                       static_cast<unsigned long long>(ack));
        return Step::kFatal;
    }
    if (error_) return Step::kContinue;
    peer_acked_ = std::max(peer_acked_, ack);
    advance();
    if (!sq_.empty() && sq_.front().seq <= ack) {
        // A read the peer answered before this request is still on its way (the other
        // stream): this request waits for it, or its effects would overtake that completion.
        responder_waits_.store(true);
        return Step::kStall;
    }
    ack_applied_.store(ack, std::memory_order_relaxed);
    return Step::kContinue;
}

void Completer::wake_responder() {
    // the responder waits while a read the peer acknowledged has not completed here
    bool caught_up = sq_.empty() || sq_.front().seq > peer_acked_;
    if (caught_up && responder_waits_.load() && responder_waits_.exchange(false))
        host_.resume_responder();
}

void Completer::flush() {
    error_ = true;
    while (!sq_.empty()) complete_front(IBV_WC_WR_FLUSH_ERR);
    unreclaimed_ = 0;
    host_.flush_receives();
    // a request waiting for a read's completion waits no more: there is nothing to order after
    if (responder_waits_.exchange(false)) host_.resume_responder();
}

void Completer::lost() {
    if (!error_ && !sq_.empty() && host_.source_faulted(sq_.front().seq))
        push_wc(sq_.pop(), IBV_WC_LOC_PROT_ERR);
    flush();
}

void Completer::abandon() noexcept {
    error_ = true;
    sq_.clear();
}

// One answer header through the states of rxe_comp (rxe_comp.c).
Step Completer::header(const FrameHeader &h, std::atomic<bool> &disc) {
    Ctx c{h, static_cast<Op>(h.op), disc, Step::kContinue};
    State st = State::kGetAnswer;
    std::unique_lock<RankedMutex> lk(sq_mu_, std::defer_lock);
    while (st != State::kDone) {
        if (st == State::kCheckSeq) lk.lock();  // from here on the send queue is read
        st = step(c, st);
    }
    return c.result;
}

// Inlined into the loop above, as the responder's steps.
[[gnu::always_inline]] inline Completer::State Completer::step(Ctx &c, State st) {
    const FrameHeader &h = c.h;
    uint64_t seq = h.aux;
    switch (st) {
        case State::kGetAnswer:
            if (c.op == Op::kDisconnect) {
                c.disc = true;
                c.result = Step::kStop;
                return State::kDone;
            }
            if (c.op == Op::kAck || c.op == Op::kReadResp || c.op == Op::kNak)
                return State::kCheckSeq;
            RPMA_LOG_ERROR("unexpected opcode %u on the answer stream", h.op);
            return fatal(c, "protocol error: unexpected opcode on the answer stream");
        case State::kCheckSeq:
            if (seq != 0 && seq <= sq_.posted() && h.length <= kMaxOpLength)
                return State::kCheckState;
            RPMA_LOG_ERROR("answer for request %llu that was never sent",
                           static_cast<unsigned long long>(seq));
            return fatal(c, "protocol error: answer for a request never sent");
        case State::kCheckState:
            // flushed already; only a read's data must still be skipped
            if (!error_) return State::kCompleteBefore;
            if (c.op == Op::kReadResp) reader_.discard(h.length);
            return State::kDone;
        case State::kCompleteBefore:
            return complete_before(c);
        case State::kCheckAck:
            if (c.op != Op::kAck) return State::kCheckOrder;
            wake_responder();
            return State::kDone;
        case State::kCheckOrder:
            if (error_) return State::kDone;  // a local error above flushed the rest
            if (!sq_.empty() && sq_.front().seq == seq)
                return c.op == Op::kNak ? State::kNak : State::kReadData;
            return fatal(c, "protocol error: answer out of order");
        case State::kNak:
            complete_front(nak_to_status(h.status));
            flush();
            return State::kDone;
        case State::kReadData:
            return read_data(c);
        case State::kDone:
            break;
    }
    return State::kDone;
}

Completer::State Completer::fatal(Ctx &c, const char *why) {
    reader_.protocol_error(why);
    c.result = Step::kFatal;
    return State::kDone;
}

// Everything before an answer is done: RC executes in order (an ACK covers its own request).
Completer::State Completer::complete_before(Ctx &c) {
    uint64_t upto = c.op == Op::kAck ? c.h.aux : c.h.aux - 1;
    peer_acked_ = std::max(peer_acked_, upto);
    while (!sq_.empty() && sq_.front().seq <= upto) {
        if (sq_.front().awaits_data()) {
            RPMA_LOG_ERROR("a read was acknowledged without its data");
            return fatal(c, "protocol error: a read acknowledged without its data");
        }
        complete_front(IBV_WC_SUCCESS);
    }
    return State::kCheckAck;
}

Completer::State Completer::read_data(Ctx &c) {
    Wqe &w = sq_.front();
    if (!w.awaits_data() || c.h.length != w.len) {
        RPMA_LOG_ERROR("read answer does not match the request");
        return fatal(c, "protocol error: read answer does not match the request");
    }
    reader_.expect(Payload::kReadResp, w.dst, w.dst_region, c.h.length);
    return State::kDone;
}

void Completer::placed(Payload p, bool failed) {
    if (p != Payload::kReadResp) return;  // skipped data
    std::lock_guard lk(sq_mu_);
    if (error_ || sq_.empty()) return;
    if (failed) {
        complete_front(IBV_WC_LOC_PROT_ERR);  // its destination was deregistered
        flush();
        return;
    }
    complete_front(IBV_WC_SUCCESS);
    advance();  // what the peer acknowledged behind this read
    wake_responder();
}

}  // namespace rpma::rc
