// The software RC engine: a reliable-connection queue pair over two byte streams (ByteStream,
// byte_stream.h), whatever the transport under them. Each side sends its requests on one stream
// and reads the answers from it; the other stream carries the peer's requests and our answers.
// So a responder that waits for a receive buffer (RNR) holds back only the peer's requests,
// never the answers to our own. A transport (tcp/queue_pair.h) derives from it: it sets up the
// two streams (connect, accept, its own handshake) and hands them over with establish_stream.
//
// Roles, after soft-RoCE: the requester (Requester, requester.h) turns posted work requests into
// frames on application threads and into the send queue (SendQueue, send_queue.h), and keeps
// the marks of requests whose source was deregistered; the responder
// (Responder, responder.h) executes the peer's requests against registered memory; the
// completer (Completer, completer.h) completes the send queue in order and fills the CQ. Each
// of those two reads its stream through its own FrameReader (frame_reader.h) and reaches this
// queue pair only through its Host. Who runs them and when is the queue pair's Progress
// (progress.h): the three tasks (responder, completer, and the requester, which is the request
// stream's transmit side), the streams' engine registrations and the CQs' progress hook. Each
// stream is a QpStream (qp_stream.h): frames wait in its TxQueue (tx_queue.h) and it sends
// them. qp_transmit.cc posts; tear-down is in qp_close.cc.
//
// The connection's CM state, deadlines and events are its Connection's (connection.h).
//
// Lock order (RankedMutex checks it in Debug and sanitizer builds):
//   QpStream::rx_mu (0) -> sq_mu_ (1) -> the Connection's (2) -> QpStream::mu (3)
// The CQ's, the receive queue's and the engine's own mutexes are taken last and hold nothing.
// Each rx_mu is taken only by its task's runner (for each read; drive across its poll) and by
// the engine's try_lock (spin, rearm): it is never waited for while another thread reads.
// Waiting for the engine thread (run_sync, Engine::add/remove) counts as taking a lock ranked
// below all of these, which the checker cannot see: a thread holding an rx_mu still never
// waits for it (remove_streams).
#pragma once

#include <librpma.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "common/fd.h"
#include "common/fd_queue.h"
#include "common/ranked_mutex.h"
#include "provider/provider.h"
#include "provider/rc/byte_stream.h"
#include "provider/rc/completer.h"
#include "provider/rc/connection.h"
#include "provider/rc/frame.h"
#include "provider/rc/frame_reader.h"
#include "provider/rc/progress.h"
#include "provider/rc/qp_stream.h"
#include "provider/rc/requester.h"
#include "provider/rc/responder.h"
#include "provider/rc/send_queue.h"
#include "provider/rc/task.h"
#include "provider/rc/tx_queue.h"
#include "provider/soft/cq.h"
#include "provider/soft/engine.h"
#include "provider/soft/recv_queue.h"
#include "provider/soft/region.h"

namespace rpma {
class MrTable;
}  // namespace rpma

namespace rpma::rc {

struct QpConfig {
    uint32_t sq_size = 0;
    uint32_t rq_size = 0;
    int timeout_ms = RPMA_DEFAULT_TIMEOUT_MS;
    Cq *cq = nullptr;       // send-side completions
    Cq *recv_cq = nullptr;  // receive completions (the RCQ, the SRQ's RCQ, or the CQ)
    RecvQueue *srq = nullptr;
};

class QueuePair : public prov::QueuePair,
                  public Handler,
                  public Completer::Host,
                  public Responder::Host,
                  public Progress::Host,
                  public std::enable_shared_from_this<QueuePair> {
  public:
    ~QueuePair() override;

    uint32_t qp_num() const noexcept override { return qp_num_; }

    // All fail with RPMA_E_PROVIDER in a forked child: the connection is the parent's.
    int post_send(prov::SendWr &&wr) override;
    int post_recv(prov::RecvWr &&r) override;
    int disconnect() override;
    // Unhooks from the engine and the CQ; once it returns no engine callback touches this
    // object.
    void close() override;

    const std::vector<uint8_t> &remote_pdata() const noexcept override {
        return conn_.remote_pdata();
    }

    // Handler: the connection's timers, and (on_events, the transport's) the fds the transport
    // registers for this queue pair itself (shm's control socket); the streams' registrations
    // are progress_'s.
    void on_timer() override;
    void on_failure(const char *why) override { lost(why, false); }
    // on: this queue pair's progress is the progress hook of the CQ and the queue pair's own
    // RCQ (off: none is).
    void set_cq_hook(bool on) noexcept;

  protected:
    using Cm = Connection::Cm;
    using Step = rc::Step;
    using Stream = QpStream;

    QueuePair(Engine *engine, MrTable *mrs, const QpConfig &cfg, FdQueue<rpma_conn_event> *events);

    // The transport has the stream connected: the engine serves it from now on (EPOLLIN when
    // rx_on). false if the engine refused it. No QP lock held: add() waits for the engine.
    bool establish_stream(Stream &s, uint32_t events);
    // The transport's: a stream left the engine (QpStream::leave_engine), on the engine thread
    // or in close.
    virtual void stream_removed() {}

    // Completer::Host: sq_mu_ held, a request's source was deregistered before it was sent
    bool source_faulted(uint64_t seq) override;
    void flush_receives() override;    // Completer::Host: sq_mu_ held, the error state
    void resume_responder() override;  // any thread: re-run a stalled request (on the engine)

    // Responder::Host (responder.cc), resp().rx_mu held
    Step note_peer_ack(uint64_t ack) override { return completer_.apply_peer_ack(ack); }
    bool queue_answer(const FrameHeader &h, const char *data, std::shared_ptr<Region> region,
                      bool batch) override;
    bool take_queued_nak() override { return progress_.resp().nak_queued.exchange(false); }
    std::optional<prov::RecvWr> take_recv() override;
    void enter_error(const prov::RecvWr *failed, ibv_wc_status st) override;
    // Responder::Host: pending ACK and answers out; false if broken
    bool answer_now() override { return progress_.answer_now(); }
    // Responder::Host: kStall if the request must wait until our answers have left, because
    // too many are queued or (modifies) a read answer still points into a region (RC order);
    // kFatal if sending them failed.
    Step wait_for_answers(bool modifies) override;

    // connection management; Progress::Host's: setup_events (the transport's: events on a
    // stream while the connection is being set up, kConnecting and kAwaitReply, on the engine
    // thread), linger_events, lost, maybe_closed
    virtual void fail_connect(rpma_conn_event ev);
    void lost(const char *why, bool peer_end = false) override;
    void linger_events(Stream &s, uint32_t events) override;
    void maybe_closed() override;
    void send_disconnect();  // engine thread
    // Both streams leave the engine (only those with nothing queued to send if idle_only): now
    // on the engine thread, on its next turn from any other (the caller may hold an rx_mu).
    void remove_streams(bool idle_only);

    Engine *engine_;
    MrTable *mrs_;
    QpConfig cfg_;
    uint32_t qp_num_;
    RecvQueue rq_;
    // The responder's place among the waiters of its receive queue (rq_ or the SRQ): a part of
    // this object, so the queue's reference to it keeps the whole alive.
    struct RecvWait final : RecvWaiter {
        explicit RecvWait(QueuePair &qp) noexcept : qp(qp) {}
        // On the poster's thread where it may: the request it waited with is served before
        // rpma_recv returns, with no hop through the engine thread.
        void recv_posted(bool here) override {
            if (!here) return qp.resume_responder();
            qp.progress_.request_resume();
            qp.progress_.run_responder(ByteStream::Reader::kWaiter);
        }
        QueuePair &qp;
    } recv_wait_{*this};
    Connection conn_;  // CM state, deadlines, the peer's QP number, events; rank kCmRank

    RankedMutex sq_mu_{kSqRank};  // the send queue, the requester's and completer's state
    SendQueue sq_;                // under sq_mu_
    Completer completer_;         // the answers to our requests (progress_'s completer task)
    Requester requester_;         // the post path and the source-fault marks (under req().mu)
    Responder responder_;         // the peer's requests (progress_'s responder task)

    Stream main_{engine_, &requester_};
    Stream join_{engine_, &requester_};
    // Who reads the streams and when: the three tasks (progress.h).
    Progress progress_;
};

}  // namespace rpma::rc
