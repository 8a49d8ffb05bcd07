// The responder (after rxe_resp): the peer's requests, read through its own FrameReader, are
// checked (length, order, rkey, a receive) and executed against registered memory; a bad one is
// NAKed and puts the queue pair in the error state. It needs of its queue pair only what Host
// says: the answers go out through it, the receives come from it, the error state is its.
//
// Threads: the runner of the queue pair's responder task runs read() and owns the state, except
// executed() and error() (atomic, any thread) and the acknowledgement bookkeeping (the answer
// stream's lock, which Host::queue_answer and the ACK's writers hold).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "provider/provider.h"
#include "provider/rc/byte_stream.h"
#include "provider/rc/completer.h"
#include "provider/rc/frame.h"
#include "provider/rc/frame_reader.h"
#include "provider/soft/region.h"

namespace rpma {
class MrTable;
}  // namespace rpma

namespace rpma::rc {

class Responder {
  public:
    // What the responder needs of its queue pair.
    class Host {
      public:
        // The peer's piggybacked ACK, applied to our send queue before its request runs:
        // kStall while a read it covers still waits for its data (resume_responder comes),
        // kFatal for a request never sent.
        virtual Step note_peer_ack(uint64_t ack) = 0;
        // Our earlier answers block a request (too many queued, or modifies and a read answer
        // still points into a region): kStall until they leave (then a resume), kFatal if
        // sending them failed.
        virtual Step wait_for_answers(bool modifies) = 0;
        // Pending ACK and queued answers out; false if the stream broke.
        virtual bool answer_now() = 0;
        // A NAK or a read's data (gathered from region when it leaves), queued in order; batch:
        // sent once enough are queued, else now. It acknowledges h.aux and all before
        // (answered(), under the answer stream's lock). false if the stream broke.
        virtual bool queue_answer(const FrameHeader &h, const char *data,
                                  std::shared_ptr<Region> region, bool batch) = 0;
        // A read answer the transmit side turned into a NAK (its region vanished), once.
        virtual bool take_queued_nak() = 0;
        // A receive for the current message; none: registered to wait for one (a resume).
        virtual std::optional<prov::RecvWr> take_recv() = 0;
        // The error state: failed (if any) completes with st, then the send queue and the
        // receives flush, in one hold of the send queue: a post in between flushes after them.
        virtual void enter_error(const prov::RecvWr *failed, ibv_wc_status st) = 0;

      protected:
        ~Host() = default;
    };
    using Target = Completer::Target;  // the receive CQ, and both queue pair numbers

    Responder(MrTable *mrs, const Target &target, Host &host) noexcept
        : mrs_(mrs), target_(target), host_(host) {}

    // The responder task's runner: requests from io until it blocks, stalls or fails
    // (end() says why), or until the peer's Disconnect (sets disc; kStop).
    Step read(ByteStream &io, std::atomic<bool> &disc);
    const ReadEnd &end() const noexcept { return reader_.end(); }
    bool drained() const noexcept { return reader_.drained(); }  // FrameReader::drained

    // The last request executed, for the ACK our frames carry (any thread).
    uint64_t executed() const noexcept { return executed_.load(std::memory_order_acquire); }
    bool error() const noexcept { return error_; }
    // A read answer became a NAK: the error state, as after any NAK (any thread; once).
    bool absorb_queued_nak();
    // Our Disconnect is queued, the last frame we send: a request after it could never be
    // acknowledged, so none is executed (rdma_disconnect leaves the QP in the error state), and
    // a stalled one is dropped when resumed (any thread).
    void drop_requests() noexcept { error_ = true; }

    // The answer stream's lock held from here on.
    // An executed request asked for an ACK that has not gone out.
    bool ack_owed() const noexcept { return ack_wanted_ && executed_ > acked_ && !error_; }
    // What an ACK would acknowledge now, up to limit; 0: nothing new (or the error state).
    uint64_t unacked(uint64_t limit = UINT64_MAX) const noexcept;
    uint64_t take_ack() noexcept;  // the ACK is queued: all executed is acknowledged
    void answered(uint64_t seq) noexcept { acked_ = seq; }

    // Receive completions (the receive CQ).
    void flush_recv(const prov::RecvWr &r);  // posted or queued in the error state
    void push_recv_wc(const prov::RecvWr &r, ibv_wc_status st, ibv_wc_opcode op, uint32_t len,
                      bool with_imm, uint32_t imm);

  private:
    // rxe_resp's states, in the order they run
    enum class State {
        kGetRequest,      // a request, or the peer's Disconnect; anything else ends the stream
        kCheckLength,     // no request moves more than kMaxOpLength (else the stream ends)
        kApplyAck,        // the peer's piggybacked ACK completes our requests before this one
        kCheckState,      // in the error state requests are dropped
        kCheckOrder,      // our earlier answers leave first (RC order, flow control)
        kCheckOpLength,   // the opcode's length rule (OpInfo::fixed_len)
        kCheckRkey,       // region, usage and range (access_ok), for opcodes with an rkey
        kCheckResources,  // a receive for a message; none posted: RNR wait (kStall)
        kExecute,         // place, answer, store or persist (execute_*)
        kErrAccess,       // NAK: remote access error
        kErrInvalid,      // NAK: invalid request
        kErrOperation,    // NAK: remote operation error
        kDrop,            // skip the payload
        kDone,
    };
    struct Ctx {
        const FrameHeader &h;
        Op op;
        uint64_t seq;  // the request's sequence number, once it is in order
        std::shared_ptr<Region> region;
        Step result;
    };
    Step header(const FrameHeader &h, std::atomic<bool> &disc);
    State step(Ctx &c, State st, std::atomic<bool> &disc);
    State fatal(Ctx &c, const char *why);
    State execute(Ctx &c);
    // The rkey check a NIC makes: the region exists, gives the access the request needs (one of
    // its OpInfo usages) and holds the range (for a flush, its 8 bytes at the offset). A 0-byte
    // request touches nothing and passes.
    bool access_ok(const FrameHeader &h, std::shared_ptr<Region> *region) const;
    State execute_write(Ctx &c);
    State execute_send(Ctx &c);
    State execute_read(Ctx &c);
    State execute_atomic_write(Ctx &c);
    State execute_flush(Ctx &c);
    // a payload is placed (failed: not all of it)
    void placed(Payload p, bool failed, uint32_t len);
    void fail_recv(ibv_wc_status st);  // the receive taken for the current message fails
    void nak(uint64_t seq, NakStatus st);

    MrTable *mrs_;
    const Target target_;
    Host &host_;
    FrameReader reader_;
    std::atomic<uint64_t> executed_{0};  // last request executed
    uint64_t pending_seq_ = 0;           // the request whose payload is arriving
    uint64_t acked_ = 0;                 // last acknowledged; the answer stream's lock
    std::atomic<bool> error_{false};
    std::atomic<bool> ack_wanted_{false};  // an executed request asked for an ACK
    bool pending_wants_ack_ = false;
    std::optional<prov::RecvWr> cur_recv_;
    uint32_t cur_imm_ = 0;
    bool cur_has_imm_ = false;
};

}  // namespace rpma::rc
