// A connection lost on an application thread that holds a stream's rx_mu, while the engine
// thread waits for that rx_mu (issue 21): the thread in serve_requests reads the peer's
// requests under resp().rx_mu, the read fails, and lost() removes the streams from the engine;
// meanwhile the engine runs resume_now, which blocks on the same rx_mu. Had lost() waited for
// the engine (Engine::remove -> run_sync) with the lock held, neither thread would ever go on.
//
// The interleaving is driven by handshakes, not timing: an in-memory stream whose read blocks
// until the test lets it fail, and RankedMutex's wait hook, which says when the engine thread
// is about to wait for rx_mu. Every wait is bounded; a deadlock fails the test (and ends the
// process, whose threads cannot be joined) instead of hanging it.
#include <gtest/gtest.h>
#include <librpma.h>
#include <sys/eventfd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "../support/mem_stream.h"
#include "common/ranked_mutex.h"
#include "provider/rc/byte_stream.h"
#include "provider/rc/queue_pair.h"
#include "provider/soft/compl_channel.h"
#include "provider/soft/cq.h"
#include "provider/soft/engine.h"
#include "provider/soft/mr_table.h"

namespace rpma::rc {
namespace {

constexpr auto kBound = std::chrono::seconds(20);  // far beyond any healthy handshake

// The test cannot go on, and its threads cannot be joined: fail loudly and end the process.
[[noreturn]] void give_up(const char *what) {
    std::fprintf(stderr, "[  FAILED  ] deadlock: %s (no progress within %lld s)\n", what,
                 static_cast<long long>(kBound.count()));
    std::fflush(stderr);
    std::_Exit(1);
}

// A one-shot event.
class Gate {
  public:
    void open() {
        std::lock_guard lk(mu_);
        open_ = true;
        cv_.notify_all();
    }
    bool wait() {
        std::unique_lock lk(mu_);
        return cv_.wait_for(lk, kBound, [&] { return open_; });
    }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool open_ = false;
};

// A stream whose next read, once armed, says so (entered), waits until the test releases it
// and then fails as a reset connection does: the fault injected at the read.
class FaultStream final : public ByteStream {
  public:
    FaultStream(std::shared_ptr<memio::Channel> in, std::shared_ptr<memio::Channel> out)
        : inner_(std::move(in), std::move(out)) {}
    void arm_fault() { armed_ = true; }
    Gate entered, release;

    ssize_t writev(const iovec *iov, int n) override { return inner_.writev(iov, n); }
    ssize_t readv(const iovec *iov, int n) override {
        if (armed_.exchange(false)) {
            entered.open();
            if (!release.wait()) give_up("the test never released the failing read");
            errno = ECONNRESET;
            return -1;
        }
        return inner_.readv(iov, n);
    }
    void shutdown(int how) override { inner_.shutdown(how); }
    Wait wait(uint32_t want) noexcept override { return inner_.wait(want); }

  private:
    memio::MemStream inner_;
    std::atomic<bool> armed_{false};
};

// The RC engine with no transport: the test hands it streams registered with the engine, each
// under an eventfd that never fires, so the engine reads nothing by itself.
class EngineQp final : public QueuePair {
  public:
    EngineQp(Engine *e, MrTable *mrs, const QpConfig &cfg, FdQueue<rpma_conn_event> *events)
        : QueuePair(e, mrs, cfg, events) {}
    int connect(const void *, uint8_t) override { return RPMA_E_NOSUPP; }
    int accept(std::unique_ptr<prov::IncomingRequest>, const void *, uint8_t) override {
        return RPMA_E_NOSUPP;
    }

    // The passive side, established over main (the peer's requests: resp()) and join.
    bool establish(ByteStream *main, ByteStream *join) {
        is_client_ = false;
        join_.answers_in = true;
        main_.io = main;
        join_.io = join;
        for (Stream *s : {&main_, &join_}) {
            s->fd = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
            s->connected = true;
            s->rx_on = true;
        }
        {
            std::lock_guard lk(cm_mu_);
            cm_ = Cm::kEstablished;
        }
        return main_.fd.valid() && join_.fd.valid() && establish_stream(main_, EPOLLIN) &&
               establish_stream(join_, EPOLLIN);
    }
    const RankedMutex *resp_rx_mu() { return &resp().rx_mu; }
    bool registered() {
        for (Stream *s : {&main_, &join_}) {
            std::lock_guard lk(s->mu);
            if (s->key != 0) return true;
        }
        return false;
    }

  private:
    void setup_events(Stream &, uint32_t) override {}
};

// The wait hook's view of the test: which mutex, which engine, and whom to tell.
std::atomic<const RankedMutex *> g_target{nullptr};
std::atomic<Engine *> g_engine{nullptr};
Gate *g_engine_waits = nullptr;

void on_lock_wait(const RankedMutex *m) {
    Engine *e = g_engine.load();
    if (m == g_target.load() && e && e->in_loop()) g_engine_waits->open();
}

TEST(RcLostDeadlock, FatalReadUnderRxMuWhileEngineWaitsForIt) {
    Engine engine;
    ASSERT_TRUE(engine.ok());
    MrTable mrs;
    ComplChannel channel;
    Cq cq(&channel, false);
    FdQueue<rpma_conn_event> events;
    QpConfig cfg;
    cfg.sq_size = cfg.rq_size = 16;
    cfg.cq = cfg.recv_cq = &cq;
    auto a = std::make_shared<memio::Channel>(), b = std::make_shared<memio::Channel>();
    auto c = std::make_shared<memio::Channel>(), d = std::make_shared<memio::Channel>();
    FaultStream requests(a, b);      // resp(): the peer's requests come here
    memio::MemStream answers(c, d);  // req(): unused here
    auto qp = std::make_shared<EngineQp>(&engine, &mrs, cfg, &events);
    ASSERT_TRUE(qp->establish(&requests, &answers));
    ASSERT_TRUE(qp->registered());

    Gate engine_waits;
    g_engine_waits = &engine_waits;
    g_engine = &engine;
    g_target = qp->resp_rx_mu();
    RankedMutex::set_wait_hook(on_lock_wait);

    // 1. An application thread serves the peer's requests (as a waiter on the CQ does): it
    //    takes resp().rx_mu and reads, and the read stops inside until released.
    requests.arm_fault();
    auto served = std::async(std::launch::async, [&] { qp->serve_requests(); });
    if (!requests.entered.wait()) give_up("serve_requests never reached the read");
    // 2. A receive is posted: the engine resumes the responder (resume_now) and waits for the
    //    rx_mu the reader holds.
    qp->recv_posted();
    if (!engine_waits.wait()) give_up("the engine never waited for rx_mu in resume_now");
    // 3. The read fails: the connection is lost on the application thread, rx_mu still held.
    requests.release.open();
    if (served.wait_for(kBound) != std::future_status::ready)
        give_up("lost() under rx_mu waits for the engine, which waits for rx_mu");
    served.get();
    RankedMutex::set_wait_hook(nullptr);
    g_target = nullptr;

    // The loss is reported as the peer's end (a reset), and the streams leave the engine.
    auto ev = events.try_pop();
    ASSERT_TRUE(ev.has_value());
    EXPECT_EQ(*ev, RPMA_CONN_CLOSED);
    auto done = std::async(std::launch::async, [&] { engine.run_sync([] {}); });
    if (done.wait_for(kBound) != std::future_status::ready)
        give_up("the engine never came back after the loss");
    EXPECT_FALSE(qp->registered());
    EXPECT_EQ(qp.use_count(), 1);  // the engine holds the queue pair no more
    qp->close();
}

}  // namespace
}  // namespace rpma::rc
