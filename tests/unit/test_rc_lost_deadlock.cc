// A connection lost on an application thread that runs the responder, while the engine wants
// it too (issue 21). Before the responder became a task (docs/rc-rebuild.md, step f1), the
// thread in serve_requests (now Progress's) read the peer's requests under resp().rx_mu and the
// engine, resuming the responder after a receive was posted, waited for that rx_mu; had lost()
// then waited for the engine, neither thread would have gone on. Now the engine's resume only
// arms the running task: the engine comes back at once while the failing read is still
// blocked, and the runner passes again after the loss.
//
// The interleaving is driven by handshakes, not timing: an in-memory stream whose read blocks
// until the test lets it fail, and RankedMutex's wait hook, which says whether the engine thread
// ever waits for resp().rx_mu. Every wait is bounded; a deadlock fails the test (and ends the
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

#include "../support/bare_qp.h"
#include "../support/mem_stream.h"
#include "common/ranked_mutex.h"
#include "provider/rc/byte_stream.h"
#include "provider/rc/queue_pair.h"
#include "provider/rc/task.h"
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
class EngineQp final : public BareQp {
  public:
    using BareQp::BareQp;

    // The passive side, established over main (the peer's requests: resp()) and join.
    bool establish(ByteStream *main, ByteStream *join) {
        join_.answers_in = true;
        main_.io = main;
        join_.io = join;
        for (Stream *s : {&main_, &join_}) {
            s->fd = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
            s->connected = true;
            s->rx_on = true;
        }
        conn_.accept();
        return main_.fd.valid() && join_.fd.valid() && establish_stream(main_, EPOLLIN) &&
               establish_stream(join_, EPOLLIN);
    }
    const RankedMutex *resp_rx_mu() { return &progress_.resp().rx_mu; }
    // A waiting thread serves the peer's requests (Progress::serve_requests).
    void serve_requests() { progress_.serve_requests(); }
    // What a posted receive does for a responder that waits for one (its RecvWaiter's wake).
    void resume() { resume_responder(); }
    Task::State responder_state() { return progress_.task(Progress::Role::kResponder).state(); }
    bool registered() {
        for (Stream *s : {&main_, &join_}) {
            std::lock_guard lk(s->mu);
            if (s->key != 0) return true;
        }
        return false;
    }
};

// The wait hook's view of the test: which mutex, which engine, and whether it waited.
std::atomic<const RankedMutex *> g_target{nullptr};
std::atomic<Engine *> g_engine{nullptr};
std::atomic<bool> g_engine_waited{false};

void on_lock_wait(const RankedMutex *m) {
    Engine *e = g_engine.load();
    if (m == g_target.load() && e && e->in_loop()) g_engine_waited = true;
}

TEST(RcLostDeadlock, FatalReadInTheRespondersPassWhileTheEngineResumesIt) {
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

    g_engine = &engine;
    g_target = qp->resp_rx_mu();
    RankedMutex::set_wait_hook(on_lock_wait);

    // 1. An application thread serves the peer's requests (as a waiter on the CQ does): it
    //    runs the responder task, and the read stops inside its pass until released.
    requests.arm_fault();
    auto served = std::async(std::launch::async, [&] { qp->serve_requests(); });
    if (!requests.entered.wait()) give_up("serve_requests never reached the read");
    // 2. A receive is posted: the engine resumes the responder, which only arms the running
    //    task, and comes back (run_sync runs after the posted resume).
    qp->resume();
    auto turned = std::async(std::launch::async, [&] { engine.run_sync([] {}); });
    if (turned.wait_for(kBound) != std::future_status::ready)
        give_up("the engine waits for the responder's runner");
    EXPECT_EQ(qp->responder_state(), Task::State::kArmed);
    // 3. The read fails: the connection is lost on the application thread, which passes once
    //    more for the resume and lets the task go.
    requests.release.open();
    if (served.wait_for(kBound) != std::future_status::ready)
        give_up("lost() in the responder's pass waits for the engine");
    served.get();
    RankedMutex::set_wait_hook(nullptr);
    g_target = nullptr;
    EXPECT_FALSE(g_engine_waited.load());  // the engine never waited for resp().rx_mu
    EXPECT_EQ(qp->responder_state(), Task::State::kIdle);

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
