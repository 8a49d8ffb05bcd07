// The RC queue pair's progress (docs/rc-rebuild.md, section 2): who reads its two streams and
// when. It owns the three tasks (task.h): the completer reads the answers to our requests, the
// responder the peer's requests, the requester sends our frames. Whoever schedules a task and
// finds it idle runs it: the engine thread, for the streams' events (this is the Handler of
// both registrations), an application thread in get_wc or wait on a CQ (this is the CQs'
// ProgressHook), or a posting thread (the requester). A schedule during a run arms it, so
// nobody waits for it; a thread waiting in drive sleeps on its own CQ until its turn
// (DriveTurn), the engine never waits. The streams are registered edge-triggered: an event
// schedules the stream's reader task, and a reader reads until the stream blocks or asks for
// another event (rewatch). A waiting or polling thread takes a socket stream off the engine's mask
// while it reads it (QpStream::sleeper), and the engine's check gives it back (on_timer).
//
// What this needs of its queue pair (queue_pair.h) is its parts, by reference, and Host: the
// set-up, loss and close paths, which are the queue pair's. Locks: as queue_pair.h says; each
// rx_mu is taken only by its task's runner (for each read; drive across its poll) and by the
// engine's try_lock (spin, rearm).
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "common/cancel.h"
#include "common/ranked_mutex.h"
#include "provider/rc/byte_stream.h"
#include "provider/rc/drive_turn.h"
#include "provider/rc/frame_reader.h"
#include "provider/rc/qp_stream.h"
#include "provider/rc/task.h"
#include "provider/soft/cq.h"
#include "provider/soft/engine.h"

namespace rpma {
class RecvQueue;
}  // namespace rpma

namespace rpma::rc {

class Completer;
class Connection;
class Responder;

class Progress final : public Handler, public ProgressHook {
  public:
    // The queue pair's, called on the paths that leave the established state or precede it.
    class Host {
      public:
        // events on a stream while the connection is being set up (the transport's handshake)
        virtual void setup_events(QpStream &s, uint32_t events) = 0;
        virtual void linger_events(QpStream &s, uint32_t events) = 0;  // closing
        virtual void lost(const char *why, bool peer_end) = 0;
        virtual void maybe_closed() = 0;  // a Disconnect came on a stream
        // any thread: re-run a stalled request (on the engine)
        virtual void resume_responder() = 0;

      protected:
        ~Host() = default;
    };

    enum class Role : uint8_t { kRequester, kCompleter, kResponder };

    // receives: where the peer's sends land (the RQ or SRQ), their completions on recv_cq.
    Progress(Host &host, Engine &engine, Connection &conn, Completer &completer,
             Responder &responder, QpStream &main, QpStream &join, RecvQueue &receives,
             Cq *recv_cq) noexcept;

    // The handler to register the streams with: this, kept alive by owner (the queue pair),
    // whose own timers (owner's on_timer) this schedules too.
    std::shared_ptr<Handler> handler(const std::shared_ptr<Handler> &owner);

    // Handler: the engine thread's, for the two streams' fds.
    void on_events(int fd, uint32_t events) override;
    void spin(int fd) override;
    void spin_end(int fd) override;
    void on_timer() override;  // the check of taken streams, when due
    void on_failure(const char *why) override { host_.lost(why, false); }
    // The engine's check of taken streams (on its thread): a stream no thread read since the
    // last check goes back to the engine. true: one is still taken (check again).
    bool check_taken();

    // ProgressHook: a thread in get_wc or wait on cq reads the answers, and the peer's requests
    // where cq takes receive completions and a receive is posted (the responder rule).
    void progress(Cq &cq, bool wait, int channel_fd) override;

    // The stream we send our requests on and read their answers from, and the other one.
    QpStream &req() noexcept { return main_.answers_in ? main_ : join_; }
    QpStream &resp() noexcept { return main_.answers_in ? join_ : main_; }
    Task &task(Role r) noexcept {
        return r == Role::kRequester   ? requester_task_
               : r == Role::kCompleter ? completer_task_
                                       : responder_task_;
    }

    // Schedules the requester (req()'s transmit side) and, if this thread won it, passes
    // (sends what is queued) until it goes idle; else its runner was armed and sends again.
    // false if a pass of this thread found the stream broken (its caller reports the loss).
    bool run_requester();
    // Schedules the responder (owned: this thread won the task already) and, if this thread
    // won it, passes until it goes idle; else the runner was armed and passes again.
    void run_responder(ByteStream::Reader who, bool owned = false);
    // The responder's next pass re-runs a stalled request (RNR, answers drained, the completer).
    void request_resume() noexcept { responder_resume_.store(true); }
    // This thread owns the completer task and its pass is over: passes again (reads req())
    // while it was scheduled meanwhile, then leaves it idle.
    void run_completer(ByteStream::Reader who);
    // A waiting or polling thread serves the peer's requests too (the responder), so a target
    // application that waits for a message handles it on its own thread. owned: this thread
    // owns the responder already (drive); look: read the stream (else only pass if armed).
    void serve_requests(ByteStream::Reader who = ByteStream::Reader::kWaiter, bool owned = false,
                        bool look = true);
    // s.rx_mu held; who: the kind of thread that reads (byte_stream.h)
    void read_stream(QpStream &s, ByteStream::Reader who = ByteStream::Reader::kWaiter);
    // the engine's EPOLLIN: schedules s's reader task, and reads if this thread won it
    void read_stream_if_free(QpStream &s, ByteStream::Reader who = ByteStream::Reader::kWaiter);
    // EPOLLOUT: queued frames out, a request that waited for them resumed (on this thread if
    // engine, else on the engine's). false if the connection was lost.
    bool on_writable(QpStream &s, bool engine);
    // Responder::Host's (the queue pair's): pending ACK and answers out; false if broken
    bool answer_now();

  private:
    QpStream *stream_of(int fd) noexcept;              // main_, join_ or nullptr
    void engine_events(QpStream &s, uint32_t events);  // the engine's, after woken()
    // who: the kind of reader the engine is here (engine_events). True if it read s on an
    // established connection.
    bool stream_events(QpStream &s, uint32_t events, ByteStream::Reader who);
    // a spinning engine stops polling s: a doorbell again, or one now if input came after its
    // last read (skipped while another thread holds s: that one asks for what it needs)
    void rearm(QpStream &s);
    // progress with wait: sleeps on the channel and the streams (serve: the request stream
    // too), reads what came
    void drive(Cq &cq, int channel_fd, bool serve, const CancelOff &off);
    // drive's sleep, the one point where a cancellation may come (common/cancel.h): then the
    // answers' lock, the completer and a served responder go back as the unwind leaves.
    int sleep(pollfd *p, nfds_t n, const CancelOff &off, bool r_own,
              std::unique_lock<RankedMutex> &rl);
    // s.mu not held: the engine's registration of s follows its state again, and the engine
    // gets an event for what is there (a doorbell rings itself; a socket's registration is
    // modified, which makes epoll look at it again): for input (or the peer's end) a read left,
    // which no new edge announces. taken: a thread just took s (QpStream::take), and the
    // engine's check is scheduled.
    void rewatch(QpStream &s, bool taken = false);
    void finish_read(QpStream &s, Step st);         // s.rx_mu held: answers out, stall, end
    void lost(QpStream &s, const char *otherwise);  // s.mu not held: s's cause, or otherwise

    Host &host_;
    Engine &engine_;
    Connection &conn_;
    Completer &completer_;
    Responder &responder_;
    QpStream &main_;
    QpStream &join_;
    RecvQueue &receives_;
    Cq *const recv_cq_;
    std::once_flag bound_;          // self_ and owner_ are set (handler)
    std::weak_ptr<Handler> self_;   // this, as handler() made it: the check's timer
    std::weak_ptr<Handler> owner_;  // the queue pair: the timer of its last answers

    // The answers to our requests; whoever owns completer_task_ reads req() (the engine on
    // EPOLLIN, a thread in drive across its poll, or in progress), holding its rx_mu for each
    // read.
    Task completer_task_;
    // A waiter that finds another asleep with the completer sleeps on its own CQ instead.
    DriveTurn turn_;
    // req()'s transmit side: whoever wins it sends the queued requests (a post, the answer
    // reader after each read, the engine on EPOLLOUT), holding req().mu for each send.
    Task requester_task_;
    // The peer's requests; whoever wins responder_task_ runs it (the engine thread, or an
    // application thread waiting on or polling the CQ), holding resp().rx_mu for each read.
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
    // Doublings of kParkCheck before the next check: one more for each check that finds a taken
    // stream still read, none once a stream goes back to the engine.
    std::atomic<unsigned> check_shift_{0};
};

}  // namespace rpma::rc
