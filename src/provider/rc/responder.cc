// The responder: the peer's requests are checked and executed against registered memory
// (engine thread, or a thread driving the stream), and answered.
#include "provider/rc/responder.h"

#include <arpa/inet.h>

#include <algorithm>

#include "common/log.h"
#include "provider/rc/opcode.h"
#include "provider/rc/qp_internal.h"
#include "provider/soft/mr_table.h"
#include "provider/soft/persist.h"

namespace rpma::rc {

Step Responder::read(ByteStream &io, std::atomic<bool> &disc) {
    struct Requests {
        Responder &r;
        std::atomic<bool> &disc;
        Step header(const FrameHeader &h) { return r.header(h, disc); }
        void placed(Payload p, bool failed, uint32_t len) { r.placed(p, failed, len); }
        // answers never wait across a system call: the peer may wait for them
        bool before_recv() { return r.host_.answer_now(); }
    } h{*this, disc};
    return reader_.read(io, disc, h);
}

uint64_t Responder::unacked(uint64_t limit) const noexcept {
    if (error_) return 0;
    uint64_t last = std::min(executed_.load(), limit);
    return last > acked_ ? last : 0;
}

uint64_t Responder::take_ack() noexcept {
    uint64_t seq = executed_.load(std::memory_order_relaxed);
    acked_ = seq;
    ack_wanted_ = false;
    return seq;
}

void Responder::nak(uint64_t seq, NakStatus st) {
    FrameHeader h{};
    h.op = static_cast<uint8_t>(Op::kNak);
    h.status = static_cast<uint16_t>(st);
    h.aux = seq;
    error_ = true;
    host_.queue_answer(h, nullptr, nullptr, false);  // a broken stream shows on the read side
    // The responder's QP goes to the error state too, as an RC QP does.
    host_.enter_error(nullptr, IBV_WC_SUCCESS);
}

bool Responder::absorb_queued_nak() {
    if (!host_.take_queued_nak()) return false;
    error_ = true;
    host_.enter_error(nullptr, IBV_WC_SUCCESS);
    return true;
}

// The responder runs one request header through the states of rxe_resp (rxe_resp.c), each
// step naming the next one, in rxe's order: a write-with-immediate takes its receive (or waits
// for one) before its rkey is checked, and a refused one completes that receive with the error.
Step Responder::header(const FrameHeader &h, std::atomic<bool> &disc) {
    Ctx c{h, static_cast<Op>(h.op), 0, nullptr, Step::kContinue};
    State st = State::kGetRequest;
    while (st != State::kDone) st = step(c, st, disc);
    return c.result;
}

// Inlined into the loop above: one jump per state, not a call (callgrind: ~280 instructions
// per request as calls).
[[gnu::always_inline]] inline Responder::State Responder::step(Ctx &c, State st,
                                                               std::atomic<bool> &disc) {
    const FrameHeader &h = c.h;
    const OpInfo &info = op_info(c.op);
    switch (st) {
        case State::kGetRequest:
            if (is_request(h.op)) return State::kCheckLength;
            if (c.op == Op::kDisconnect) {
                disc = true;
                c.result = Step::kStop;
                return State::kDone;
            }
            RPMA_LOG_ERROR("unexpected opcode %u on the request stream", h.op);
            return fatal(c, "protocol error: unexpected opcode");
        case State::kCheckLength:
            // a flush's length is the range it covers, not bytes that move (rpma_flush(3))
            if (h.length <= kMaxOpLength || c.op == Op::kFlush) return State::kApplyAck;
            RPMA_LOG_ERROR("request of %u bytes exceeds the limit", h.length);
            return fatal(c, "protocol error: oversized request");
        case State::kApplyAck:
            // The peer's acknowledgement first: its request may react to a completion of ours.
            c.result = host_.note_peer_ack(h.ack);
            if (c.result == Step::kFatal)
                return fatal(c, "protocol error: acknowledgement of a request never sent");
            if (c.result != Step::kContinue) return State::kDone;  // kAwaitCompleter
            absorb_queued_nak();
            return State::kCheckState;
        case State::kCheckState:
            // In the error state requests are dropped; the stream is read on to its disconnect.
            return error_ ? State::kDrop : State::kCheckOrder;
        case State::kCheckOrder:
            // Reads answered earlier must not see what this request changes, and a peer that
            // does not read its answers must not make us queue more.
            c.result = host_.wait_for_answers(info.modifies);
            if (c.result != Step::kContinue) return State::kDone;
            if (absorb_queued_nak()) return State::kDrop;
            c.seq = executed_ + 1;
            return State::kCheckOpLength;
        case State::kCheckOpLength:
            if (info.fixed_len && (h.length != info.fixed_len || h.addr % info.fixed_len != 0))
                return State::kErrInvalid;
            if (info.recv) return State::kCheckResources;
            return info.usage ? State::kCheckRkey : State::kExecute;
        case State::kCheckResources:
            if (!(cur_recv_ = host_.take_recv())) {
                c.result = Step::kStall;  // RNR: resumed when a receive is posted
                return State::kDone;
            }
            return info.usage ? State::kCheckRkey : State::kExecute;
        case State::kCheckRkey:
            return access_ok(h, &c.region) ? State::kExecute : State::kErrAccess;
        case State::kExecute:
            return execute(c);
        case State::kErrAccess:
            fail_recv(IBV_WC_REM_ACCESS_ERR);  // a write-with-immediate's, taken already
            nak(c.seq, NakStatus::kAccess);
            return State::kDrop;
        case State::kErrInvalid:
            nak(c.seq, NakStatus::kInvalidRequest);
            return State::kDrop;
        case State::kErrOperation:
            nak(c.seq, NakStatus::kOperation);
            return State::kDrop;
        case State::kDrop:
            if (info.payload) reader_.discard(h.length);
            c.result = Step::kContinue;
            return State::kDone;
        case State::kDone:
            break;
    }
    return State::kDone;
}

Responder::State Responder::fatal(Ctx &c, const char *why) {
    reader_.protocol_error(why);
    c.result = Step::kFatal;
    return State::kDone;
}

Responder::State Responder::execute(Ctx &c) {
    switch (c.op) {
        case Op::kWrite:
        case Op::kWriteImm:
            return execute_write(c);
        case Op::kSend:
        case Op::kSendImm:
            return execute_send(c);
        case Op::kRead:
            return execute_read(c);
        case Op::kAtomicWrite:
            return execute_atomic_write(c);
        default:
            return execute_flush(c);
    }
}

// A flush is checked as the 8-byte read that carries it out on RDMA (upstream librpma posts it at
// the offset, whatever the length), so a program meets the same checks on every provider.
constexpr uint64_t kFlushCheckLen = 8;

bool Responder::access_ok(const FrameHeader &h, std::shared_ptr<Region> *region) const {
    const Op op = static_cast<Op>(h.op);
    const uint64_t len = op == Op::kFlush ? kFlushCheckLen : h.length;
    if (len == 0 && op != Op::kAtomicWrite) return true;  // touches nothing
    *region = mrs_->find(h.rkey);
    return *region && ((*region)->usage() & op_info(op).usage) && (*region)->contains(h.addr, len);
}

// Writes and sends execute once their payload is placed (placed); acknowledged then.
Responder::State Responder::execute_write(Ctx &c) {
    const FrameHeader &h = c.h;
    bool imm = c.op == Op::kWriteImm;
    if (imm) {
        cur_imm_ = h.imm;
        cur_has_imm_ = true;
    }
    pending_seq_ = c.seq;
    pending_wants_ack_ = h.flags & kAckRequested;
    char *dst = c.region ? reinterpret_cast<char *>(h.addr) : nullptr;
    reader_.expect(imm ? Payload::kWriteImm : Payload::kWrite, dst, std::move(c.region), h.length);
    return State::kDone;
}

Responder::State Responder::execute_send(Ctx &c) {
    const FrameHeader &h = c.h;
    pending_seq_ = c.seq;
    pending_wants_ack_ = h.flags & kAckRequested;
    cur_has_imm_ = c.op == Op::kSendImm;
    cur_imm_ = h.imm;
    if (h.length > cur_recv_->len) {
        RPMA_LOG_WARNING("message of %u bytes for a receive buffer of %u", h.length,
                         cur_recv_->len);
        fail_recv(IBV_WC_LOC_LEN_ERR);
        return State::kErrInvalid;
    }
    // the region is the domain's; usable is checked as a NIC checks the lkey: on arrival
    reader_.expect(Payload::kSend, cur_recv_->ptr,
                   std::static_pointer_cast<Region>(cur_recv_->region), h.length,
                   !cur_recv_->usable);
    return State::kDone;
}

Responder::State Responder::execute_read(Ctx &c) {
    const FrameHeader &h = c.h;
    executed_ = c.seq;
    FrameHeader r{};
    r.op = static_cast<uint8_t>(Op::kReadResp);
    r.length = h.length;
    r.aux = c.seq;  // the read answer acknowledges it and everything before
    // zero-copy: the answer is gathered from the region when the stream takes it
    if (!host_.queue_answer(r, h.length ? reinterpret_cast<char *>(h.addr) : nullptr,
                            h.length ? std::move(c.region) : nullptr, true))
        c.result = Step::kFatal;
    return State::kDone;
}

Responder::State Responder::execute_atomic_write(Ctx &c) {
    RegionUse use(c.region.get());
    if (!use.ok()) return State::kErrAccess;
    // one aligned 8-byte store: a concurrent reader sees the old or the new value
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(c.h.addr))
        .store(c.h.aux, std::memory_order_release);
    executed_ = c.seq;
    if (c.h.flags & kAckRequested) ack_wanted_.store(true);
    return State::kDone;
}

Responder::State Responder::execute_flush(Ctx &c) {
    const FrameHeader &h = c.h;
    if ((h.flags & kFlushPersistent) && h.length) {
        RegionUse use(c.region.get());
        // the range asked for, as far as it lies in the region (access_ok checked its start);
        // kFlushToEnd: a longer flush, to the region's end
        const Region &r = *c.region;
        uint64_t end = reinterpret_cast<uintptr_t>(r.addr()) + r.size();
        uint64_t len = h.length == prov::kFlushToEnd ? end - h.addr
                                                     : std::min<uint64_t>(h.length, end - h.addr);
        if (!use.ok() || persist_range(reinterpret_cast<char *>(h.addr), len) != 0)
            return State::kErrOperation;
    }
    executed_ = c.seq;
    if (h.flags & kAckRequested) ack_wanted_.store(true);
    return State::kDone;
}

void Responder::placed(Payload p, bool failed, uint32_t len) {
    if (p != Payload::kWrite && p != Payload::kWriteImm && p != Payload::kSend) return;  // dropped
    if (failed) {
        // Not all of it was placed (region deregistered, or a receive buffer it may not use):
        // the receive fails here, and the requester hears it was not done.
        RPMA_LOG_WARNING("%s", p == Payload::kSend ? "receive buffer not usable"
                                                   : "write target deregistered mid-write");
        fail_recv(p == Payload::kSend ? IBV_WC_LOC_PROT_ERR : IBV_WC_WR_FLUSH_ERR);
        nak(pending_seq_, p == Payload::kSend ? NakStatus::kOperation : NakStatus::kAccess);
        return;
    }
    // Executed: the ACK state moves before the application can see the receive, so anything it
    // posts in reaction carries this acknowledgement.
    executed_.store(pending_seq_, std::memory_order_release);
    if (pending_wants_ack_) ack_wanted_.store(true);
    if (cur_recv_) {
        ibv_wc_opcode op = p == Payload::kSend ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM;
        push_recv_wc(*cur_recv_, IBV_WC_SUCCESS, op, len, cur_has_imm_, cur_imm_);
        cur_recv_.reset();
    }
}

void Responder::fail_recv(ibv_wc_status st) {
    if (!cur_recv_) return;
    // Its completion, then the error state's flush, in one step: whatever the application
    // posts once it sees this completes after everything older.
    prov::RecvWr r = std::move(*cur_recv_);
    cur_recv_.reset();
    host_.enter_error(&r, st);
}

void Responder::push_recv_wc(const prov::RecvWr &r, ibv_wc_status st, ibv_wc_opcode op,
                             uint32_t len, bool with_imm, uint32_t imm) {
    ibv_wc wc{};
    wc.wr_id = r.wr_id;
    wc.status = st;
    wc.opcode = op;
    wc.byte_len = len;
    wc.qp_num = target_.qp_num;
    wc.src_qp = *target_.remote_qp;
    if (with_imm) {
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = htonl(imm);
    }
    target_.cq->push(wc);
}

void Responder::flush_recv(const prov::RecvWr &r) {
    push_recv_wc(r, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0);
}

}  // namespace rpma::rc
