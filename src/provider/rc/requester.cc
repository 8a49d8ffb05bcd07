// The requester: posted work requests become send queue entries and frames (application
// threads); a deregistered source becomes a mark the completer turns into LOC_PROT_ERR.
#include "provider/rc/requester.h"

#include <algorithm>

#include "common/log.h"
#include "provider/rc/opcode.h"

namespace rpma::rc {

namespace {

// prov::WrOp's order is the opcode order on the wire
constexpr Op to_op(prov::WrOp op) noexcept {
    return static_cast<Op>(static_cast<int>(op) + static_cast<int>(Op::kWrite));
}
static_assert(to_op(prov::WrOp::kSendImm) == Op::kSendImm &&
              to_op(prov::WrOp::kFlush) == Op::kFlush);

}  // namespace

int Requester::post(prov::SendWr wr, bool open, uint64_t ack, std::optional<TxItem> &frame) {
    Op op = to_op(wr.op);
    // the domain's regions are all Regions
    std::shared_ptr<Region> local_region;
    if (wr.local_region) local_region = std::static_pointer_cast<Region>(*wr.local_region);
    if (completer_.error() || !open) {
        // as verbs: a QP in the error state takes the request and flushes it
        completer_.flush_post(wr.wr_id, op, wr.signaled);
        return 0;
    }
    if (sq_.outstanding() + completer_.unreclaimed() >= sq_size_) {
        RPMA_LOG_ERROR(
            "send queue full (%u entries: %zu in flight from #%llu, %u done "
            "unsignaled); signal a completion more often",
            sq_size_, sq_.outstanding(),
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
    if (wr.signaled || ++unsignaled_run_ >= std::max(1u, sq_size_ / 2)) {
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
    h.ack = ack;
    frame.emplace(TxItem{h, carries ? wr.local : nullptr, carries ? wr.len : 0u, nullptr, seq});
    if (carries && wr.len) frame->guard = std::move(local_region);
    return 0;
}

const char *Requester::source_vanished(TxItem &it, bool started, const char *down) {
    bool message = it.hdr.op == static_cast<uint8_t>(Op::kSend) ||
                   it.hdr.op == static_cast<uint8_t>(Op::kSendImm);
    // The request completes with LOC_PROT_ERR in its turn. A frame not yet begun becomes an
    // empty write the peer acknowledges; a write half sent is finished with zeros (the target
    // range is then undefined, as after a failed RDMA write). A message half sent ends the
    // connection: finished, it would complete the peer's receive, which on a NIC never sees its
    // last packet and is flushed.
    if (started && message && down) return down;  // found before; the stream is down
    src_faults_.push_back(it.seq);
    faults_.fetch_add(1, std::memory_order_release);
    if (started && message) {
        RPMA_LOG_ERROR("a region was deregistered under a message in progress");
        return "a region was deregistered under a message in progress";
    }
    if (!started) {
        it.hdr.op = static_cast<uint8_t>(Op::kWrite);
        it.hdr.flags = kAckRequested;
        it.hdr.length = 0;
        it.hdr.rkey = 0;
        it.hdr.addr = 0;
        it.len = 0;
    } else {
        it.zero_fill = true;
    }
    it.data = nullptr;
    return nullptr;
}

bool Requester::take_fault(uint64_t seq) {
    auto it = std::find(src_faults_.begin(), src_faults_.end(), seq);
    if (it == src_faults_.end()) return false;
    src_faults_.erase(it);
    faults_.fetch_sub(1, std::memory_order_relaxed);
    return true;
}

}  // namespace rpma::rc
