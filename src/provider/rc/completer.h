// The completer (after rxe_comp): answers (ACK, NAK, read data) and the peer's piggybacked
// acknowledgements complete the send queue's requests in order; a NAK or a local error puts the
// queue pair in the error state, which flushes the rest. It reads the answer stream through its
// own FrameReader and needs of its queue pair only what Host says.
//
// Locks: read() runs with the answer stream's rx_mu held and takes sq_mu for the send queue;
// every other call but apply_peer_ack() wants sq_mu held already.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

#include "common/ranked_mutex.h"
#include "provider/rc/byte_stream.h"
#include "provider/rc/frame.h"
#include "provider/rc/frame_reader.h"
#include "provider/rc/send_queue.h"
#include "provider/soft/cq.h"

namespace rpma::rc {

class Completer {
  public:
    // What the completer needs of its queue pair.
    class Host {
      public:
        // sq_mu held: the request's source was deregistered before its frame left
        virtual bool source_faulted(uint64_t seq) = 0;
        // sq_mu held, after the send queue's flush: the receives flush too (the error state)
        virtual void flush_receives() = 0;
        // any thread: the request the responder held back for a read's completion may go on
        virtual void resume_responder() = 0;

      protected:
        ~Host() = default;
    };
    // Where completions go: the send CQ, stamped with both queue pair numbers (the remote one
    // is the transport's, known once the handshake has run).
    struct Target {
        Cq *cq;
        uint32_t qp_num;
        const uint32_t *remote_qp;
    };

    Completer(SendQueue &sq, RankedMutex &sq_mu, const Target &target, Host &host) noexcept
        : sq_(sq), sq_mu_(sq_mu), target_(target), host_(host) {}

    // The answer stream's rx_mu held: answers from io until it blocks or fails (end() says
    // why), or until the peer's Disconnect (sets disc; kStop).
    Step read(ByteStream &io, std::atomic<bool> &disc);
    const ReadEnd &end() const noexcept { return reader_.end(); }
    bool drained() const noexcept { return reader_.drained(); }  // FrameReader::drained

    // The peer's acknowledgement piggybacked on its request, applied before that request runs
    // (the responder's kApplyAck): kStall while a read it covers still waits for its data (then
    // Host::resume_responder comes), kFatal for a request never sent.
    Step apply_peer_ack(uint64_t ack);

    // sq_mu held from here on.
    bool error() const noexcept { return error_; }
    uint32_t unreclaimed() const noexcept { return unreclaimed_; }
    // The error state: everything outstanding completes with IBV_WC_WR_FLUSH_ERR, then the
    // receives (Host).
    void flush();
    // The connection ended: a message half sent from a deregistered region fails first, as the
    // NIC reports it, then everything flushes.
    void lost();
    // The queue pair is closed: the requests leave without completions (nobody sees them).
    void abandon() noexcept;
    // A request posted in the error state completes at once, flushed, never entering the ring.
    void flush_post(uint64_t wr_id, Op op, bool signaled);

  private:
    // rxe_comp's states, in the order they run (sq_mu held from kCheckSeq on)
    enum class State {
        kGetAnswer,       // ACK, NAK or read data, or the peer's Disconnect
        kCheckSeq,        // answers only a request that was sent
        kCheckState,      // in the error state all is flushed: read data is skipped
        kCompleteBefore,  // every earlier request is done (RC order)
        kCheckAck,        // an ACK is done here
        kCheckOrder,      // a NAK or read data answers the oldest request
        kNak,             // it fails with the NAK's status, and the rest are flushed
        kReadData,        // the data goes to the read's destination
        kDone,
    };
    struct Ctx {
        const FrameHeader &h;
        Op op;
        std::atomic<bool> &disc;
        Step result;
    };
    Step header(const FrameHeader &h, std::atomic<bool> &disc);
    State step(Ctx &c, State st);
    State fatal(Ctx &c, const char *why);
    State complete_before(Ctx &c);
    State read_data(Ctx &c);
    void placed(Payload p, bool failed);  // a read's data is in (failed: its target vanished)
    void complete_front(ibv_wc_status st);
    void advance();  // what the peer acknowledged, up to the first read still without its data
    void wake_responder();  // the responder's wait for a read's completion may be over
    void push_wc(const Wqe &w, ibv_wc_status st);

    SendQueue &sq_;
    RankedMutex &sq_mu_;
    const Target target_;
    Host &host_;
    FrameReader reader_;  // the answer stream's rx_mu
    // under sq_mu_
    bool error_ = false;
    uint32_t unreclaimed_ = 0;  // unsignaled requests done but still holding send queue slots
    uint64_t peer_acked_ = 0;   // the peer executed our requests up to here
    std::atomic<uint64_t> ack_applied_{0};      // acknowledgements up to here need no work
    std::atomic<bool> responder_waits_{false};  // apply_peer_ack stalled the responder
};

}  // namespace rpma::rc
