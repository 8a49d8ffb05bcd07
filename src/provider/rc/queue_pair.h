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
// queue pair only through its Host. The responder is a task (task.h): whoever schedules it
// and finds it idle runs it (the engine thread, or an application thread that waits on or polls
// its CQ: serve_requests); a schedule during a run arms it, so nobody waits for it. The
// completer is a task too, run on the engine or on such a thread (progress, the CQs'
// ProgressHook); a thread waiting in drive waits for its turn (wait_idle), the engine never
// does. The request stream's transmit side is the requester task: a post runs it inline when
// it is idle and arms it when another thread runs it; the answer reader and EPOLLOUT schedule
// it too (run_requester). Frames wait in a TxQueue per stream (tx_queue.h) and go out in
// qp_transmit.cc; qp_receive.cc steers the reads; tear-down is in qp_close.cc.
//
// The connection's CM state, deadlines and events are its Connection's (connection.h).
//
// Lock order (RankedMutex checks it in Debug and sanitizer builds):
//   Stream::rx_mu (0) -> sq_mu_ (1) -> the Connection's (2) -> Stream::mu (3)
// The CQ's, the receive queue's and the engine's own mutexes are taken last and hold nothing.
// Each rx_mu is taken only by its task's runner (for each read; drive across its poll) and by
// the engine's try_lock (spin, rearm): it is never waited for while another thread reads.
// The streams are registered edge-triggered: an event schedules the stream's reader task, and
// a reader reads until the stream blocks or asks for another event (rewatch). A waiting or
// polling thread takes a socket stream off the engine's mask while it reads it
// (Stream::sleeper), and the engine's check gives it back. Waiting for the engine thread
// (run_sync, Engine::add/remove) counts as taking a lock ranked below all of these, which the
// checker cannot see: a thread holding an rx_mu still never waits for it (remove_streams).
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
                  public RecvWaiter,
                  public ProgressHook,
                  public Completer::Host,
                  public Responder::Host,
                  public std::enable_shared_from_this<QueuePair> {
  public:
    friend struct QpTestAccess;  // the unit tests (tests/unit/test_rc_engine.cc)
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

    void on_events(int fd, uint32_t events) override;  // the streams' fds
    void spin(int fd) override;
    void spin_end(int fd) override;
    void on_timer() override;
    void on_failure(const char *why) override { lost(why); }
    void recv_posted() override;
    // ProgressHook: a thread in get_wc or wait on cq reads the answers, and the peer's requests
    // where cq takes receive completions and a receive is posted (the responder rule).
    void progress(Cq &cq, bool wait, int channel_fd) override;
    // h (this queue pair, or nullptr) is the progress hook of the CQ and the queue pair's own
    // RCQ.
    void set_cq_hook(ProgressHook *h) noexcept;
    // A waiting or polling thread serves the peer's requests too (the responder), so a target
    // application that waits for a message handles it on its own thread. owned: this thread
    // owns the responder already (drive); look: read the stream (else only pass if armed).
    void serve_requests(ByteStream::Reader who = ByteStream::Reader::kWaiter, bool owned = false,
                        bool look = true);

  protected:
    using Cm = Connection::Cm;
    using Step = rc::Step;

    enum LockRank : unsigned { kRxRank, kSqRank, kCmRank, kTxRank };

    struct Stream {
        Fd fd;                     // registered with the engine: readable when io has input
        ByteStream *io = nullptr;  // the transport's; what the RC engine reads and writes
        std::unique_ptr<ByteStream> owned_io;  // io, when the queue pair owns it
        uint64_t key = 0;
        bool answers_in = false;  // we send our requests here and read their answers
        // rx: whoever holds rx_mu (the frames: the completer or the responder)
        bool stalled = false;  // a request waits: a receive, the peer's answer or our answers
        // under mu (its reader and flush_tx both set them): what ended the stream, for the log
        const char *why = nullptr;
        bool peer_end = false;             // why: the peer's kernel ended it (its process is gone)
        std::atomic<bool> disc_rx{false};  // the peer's Disconnect came on this stream
        bool connected = false;
        // tx: under mu
        RankedMutex mu{kTxRank};
        TxQueue tx;
        bool want_out = false;
        bool rx_on = false;
        bool wr_shut = false;
        bool drain_wait = false;              // the responder waits for the answers to leave
        std::atomic<bool> nak_queued{false};  // a read answer became a NAK: responder in error
        RankedMutex rx_mu{kRxRank};  // whoever reads the stream holds it, a driving waiter too
        // The engine saw the peer's end (RDHUP, HUP, ERR), which an edge-triggered registration
        // shows once: the next read that stops short of it comes back for it (read_stream).
        std::atomic<bool> end_seen{false};
        // Who watches a socket stream's input. kEngine: the engine (EPOLLIN in its mask). A
        // thread that waits or polls on it takes it (take; the request stream only where that
        // thread serves requests), so that the engine is not woken beside that thread for
        // every message: kThread, a thread read it since the engine's last check; kThreadIdle,
        // none did, and the next check gives it back (on_timer, every kParkCheck while taken).
        enum class Sleeper : uint8_t { kEngine, kThread, kThreadIdle };
        std::atomic<Sleeper> sleeper{Sleeper::kEngine};
        // A thread about to read the stream takes it; true: it was the engine's, and the caller
        // takes it off the engine's mask (rewatch). A doorbell stream only by a waiter
        // (doorbells): a poller's late doorbell (ShmStream) keeps the engine from waking.
        bool take(bool doorbells = false) noexcept {
            return (doorbells || !io->doorbell()) &&
                   sleeper.exchange(Sleeper::kThread) == Sleeper::kEngine;
        }

        bool readable() {  // a read could take input now (rx on, not stalled)
            std::lock_guard lk(mu);
            return rx_on && !stalled && !disc_rx;
        }
    };

    QueuePair(Engine *engine, MrTable *mrs, const QpConfig &cfg, FdQueue<rpma_conn_event> *events);

    // The transport's: events on a stream while the connection is being set up (kConnecting,
    // kAwaitReply), on the engine thread.
    virtual void setup_events(Stream &s, uint32_t events) = 0;
    // The transport has the stream connected: the engine serves it from now on (EPOLLIN when
    // rx_on). false if the engine refused it. No QP lock held: add() waits for the engine.
    bool establish_stream(Stream &s, uint32_t events);
    // The transport's: events on an fd of its own that it registered with the engine for this
    // queue pair (shm's control socket), on the engine thread.
    virtual void other_events(int /*fd*/, uint32_t /*events*/) {}
    // The transport's: a stream left the engine (remove_stream), on the engine thread or in
    // close.
    virtual void stream_removed() {}

    Stream &req() noexcept { return is_client_ ? main_ : join_; }
    Stream &resp() noexcept { return is_client_ ? join_ : main_; }

    // tx
    bool region_vanished(Stream &s, TxItem &it);  // s.mu held; false: the stream must end
    bool flush_tx(Stream &s);                     // s.mu held; false on a broken stream
    void update_mask(Stream &s);                  // s.mu held
    // Schedules the requester (req()'s transmit side) and, if this thread won it, passes
    // (sends what is queued) until it goes idle; else its runner was armed and sends again.
    // false if a pass of this thread found the stream broken (its caller reports the loss).
    bool run_requester();

    // rx
    // s.rx_mu held; who: the kind of thread that reads (byte_stream.h)
    void read_stream(Stream &s, ByteStream::Reader who = ByteStream::Reader::kWaiter);
    Stream *stream_of(int fd) noexcept;              // main_, join_ or nullptr
    void engine_events(Stream &s, uint32_t events);  // the engine's, after woken()
    // who: the kind of reader the engine is here (engine_events)
    void stream_events(Stream &s, uint32_t events, ByteStream::Reader who);
    // a spinning engine stops polling s: a doorbell again, or one now if input came after its
    // last read (skipped while another thread holds s: that one asks for what it needs)
    void rearm(Stream &s);
    // takes s.rx_mu (the peer's requests: the responder task), or leaves the work to its
    // holder; who: as read_stream
    void read_stream_if_free(Stream &s, ByteStream::Reader who = ByteStream::Reader::kWaiter);
    // progress with wait: sleeps on the channel and the streams (serve: the request stream
    // too), reads what came
    void drive(Cq &cq, int channel_fd, bool serve);
    // EPOLLOUT: queued frames out, a request that waited for them resumed (on this thread if
    // engine, else on the engine's). false if the connection was lost.
    bool on_writable(Stream &s, bool engine);
    // s.mu not held: the engine's registration of s follows its state again, and the engine
    // gets an event for what is there (a doorbell rings itself; a socket's registration is
    // modified, which makes epoll look at it again): for input (or the peer's end) a read left,
    // which no new edge announces. taken: a thread just took s (Stream::take), and the
    // engine's check is scheduled.
    void rewatch(Stream &s, bool taken = false);
    void finish_read(Stream &s, Step st);  // s.rx_mu held: answers out, stall, end
    // Completer::Host: sq_mu_ held, a request's source was deregistered before it was sent
    bool source_faulted(uint64_t seq) override;
    void flush_receives() override;    // Completer::Host: sq_mu_ held, the error state
    void resume_responder() override;  // any thread: re-run a stalled request (on the engine)
    // Schedules the responder (owned: this thread won the task already) and, if this thread
    // won it, passes until it goes idle; else the runner was armed and passes again.
    void run_responder(ByteStream::Reader who, bool owned = false);
    // This thread owns completer_task_ and its pass is over: passes again (reads req()) while
    // it was scheduled meanwhile, then leaves it idle.
    void run_completer(ByteStream::Reader who);

    // Responder::Host (responder.cc), resp().rx_mu held
    Step note_peer_ack(uint64_t ack) override { return completer_.apply_peer_ack(ack); }
    bool queue_answer(const FrameHeader &h, const char *data, std::shared_ptr<Region> region,
                      bool batch) override;
    bool take_queued_nak() override { return resp().nak_queued.exchange(false); }
    std::optional<prov::RecvWr> take_recv() override;
    void enter_error(const prov::RecvWr *failed, ibv_wc_status st) override;

    // connection management
    void fail_connect(rpma_conn_event ev);
    void lost(const char *why, bool peer_end = false);
    void lost(Stream &s, const char *otherwise) {  // s.mu not held
        const char *why;
        bool peer_end;
        {
            std::lock_guard lk(s.mu);
            why = s.why;
            peer_end = s.peer_end;
        }
        lost(why ? why : otherwise, why && peer_end);
    }
    void close_on_engine();
    void settle_for_close(Stream &s);  // s.mu held
    void linger_events(Stream &s, uint32_t events);
    void maybe_closed();
    void send_disconnect();      // engine thread
    void append_ack(Stream &s);  // engine thread, s.mu held
    // Responder::Host: pending ACK and answers out; false if broken
    bool answer_now() override;
    // Responder::Host: kStall if the request must wait until our answers have left, because
    // too many are queued or (modifies) a read answer still points into a region (RC order);
    // kFatal if sending them failed.
    Step wait_for_answers(bool modifies) override;
    static bool answers_block(const Stream &s, bool modifies) noexcept;
    static bool take_drained(Stream &s) noexcept;  // s.mu held: a drain_wait request may go on
    void remove_stream(Stream &s);
    // Both streams leave the engine (only those with nothing queued to send if idle_only): now
    // on the engine thread, on its next turn from any other (the caller may hold an rx_mu).
    void remove_streams(bool idle_only);

    Engine *engine_;
    MrTable *mrs_;
    QpConfig cfg_;
    uint32_t qp_num_;
    bool is_client_ = false;
    RecvQueue rq_;
    Connection conn_;  // CM state, deadlines, the peer's QP number, events; rank kCmRank

    RankedMutex sq_mu_{kSqRank};  // the send queue, the requester's and completer's state
    SendQueue sq_;                // under sq_mu_
    // The answers to our requests; whoever owns completer_task_ reads req() (the engine on
    // EPOLLIN, a thread in drive across its poll, or in progress), holding its rx_mu for each
    // read.
    Completer completer_;
    Task completer_task_;
    // the post path and the source-fault marks (under req().mu)
    Requester requester_;
    // req()'s transmit side: whoever wins it sends the queued requests (a post, the answer
    // reader after each read, the engine on EPOLLOUT), holding req().mu for each send.
    Task requester_task_;

    // The peer's requests; whoever wins responder_task_ runs it (the engine thread, or an
    // application thread waiting on or polling the CQ), holding resp().rx_mu for each read.
    Responder responder_;
    Task responder_task_;
    std::atomic<bool> responder_resume_{false};  // its next pass re-runs a stalled request
    // An application thread executed the peer's requests here (serve_requests): waiters and
    // pollers keep serving them (where their CQ takes receives and one is posted).
    std::atomic<bool> waiter_serves_{false};
    // Empty polls of threads spinning on the CQ; every kPollsPerRequestLook-th reads the
    // request stream while waiter_serves_ is not set.
    static constexpr uint32_t kPollsPerRequestLook = 64;
    std::atomic<uint32_t> polls_{0};
    // The last waiting pass read what woke it: the next polling pass skips its reads (progress).
    std::atomic<bool> drained_by_wait_{false};
    // When the engine's check of taken streams is due (Clock ticks; 0: none is scheduled): one
    // timer at a time, whoever takes a stream or finds one still taken schedules it (on_timer).
    std::atomic<Clock::rep> check_at_{0};

    Stream main_;
    Stream join_;
};

}  // namespace rpma::rc
