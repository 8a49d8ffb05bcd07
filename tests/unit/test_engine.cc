// The progress engine: a handler that throws does not end the process or the loop, and in a
// forked child nothing waits for the parent's engine thread.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>

#include "provider/soft/engine.h"
#include "thread_state.h"

using namespace rpma;
using namespace std::chrono_literals;

namespace {

// Takes what an eventfd holds, so that the next write is a new edge.
void drain(const Fd &fd) {
    uint64_t v;
    ssize_t r = ::read(fd.get(), &v, sizeof(v));
    (void)r;
}

// Reads its eventfd when it fires; throws bad_alloc on the first event or timer if asked.
class Probe : public Handler {
  public:
    explicit Probe(bool throw_once) : fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
        throw_ = throw_once;
    }
    void on_events(int, uint32_t) override {
        drain(fd);
        maybe_throw();
        events++;
    }
    void on_timer() override {
        maybe_throw();
        timers++;
    }
    void on_failure(const char *why) override {
        failures++;
        last_why = why;
    }
    void kick() {
        uint64_t one = 1;
        ASSERT_EQ(::write(fd.get(), &one, sizeof(one)), 8);
    }

    Fd fd;
    std::atomic<int> events{0}, timers{0}, failures{0};
    std::atomic<const char *> last_why{nullptr};

  private:
    void maybe_throw() {
        if (throw_.exchange(false)) throw std::bad_alloc();
    }
    std::atomic<bool> throw_{false};
};

bool eventually(const std::function<bool()> &cond) {
    for (int i = 0; i < 500; ++i) {
        if (cond()) return true;
        std::this_thread::sleep_for(2ms);
    }
    return cond();
}

}  // namespace

TEST(Engine, HandlerThatThrowsIsToldAndLoopGoesOn) {
    Engine e;
    ASSERT_TRUE(e.ok());
    EXPECT_FALSE(e.foreign());
    auto bad = std::make_shared<Probe>(true), good = std::make_shared<Probe>(false);
    uint64_t kb = e.add(bad->fd.get(), EPOLLIN, bad), kg = e.add(good->fd.get(), EPOLLIN, good);
    ASSERT_NE(kb, 0u);
    ASSERT_NE(kg, 0u);
    bad->kick();
    ASSERT_TRUE(eventually([&] { return bad->failures == 1; }));
    EXPECT_STREQ(bad->last_why.load(), "out of memory on the progress thread");
    EXPECT_EQ(bad->events, 0);
    // the loop still serves both
    good->kick();
    bad->kick();
    EXPECT_TRUE(eventually([&] { return good->events == 1 && bad->events == 1; }));
    EXPECT_EQ(good->failures, 0);
    e.remove(kb);
    e.remove(kg);
}

TEST(Engine, TimerThatThrowsIsToldAndLoopGoesOn) {
    Engine e;
    auto bad = std::make_shared<Probe>(true);
    e.add_timer(Clock::now(), bad);
    ASSERT_TRUE(eventually([&] { return bad->failures == 1; }));
    e.add_timer(Clock::now(), bad);
    EXPECT_TRUE(eventually([&] { return bad->timers == 1; }));
}

TEST(Engine, RunSyncHandsExceptionsToTheCaller) {
    Engine e;
    EXPECT_THROW(e.run_sync([] { throw std::bad_alloc(); }), std::bad_alloc);
    EXPECT_THROW(e.run_sync([] { throw std::runtime_error("x"); }), std::runtime_error);
    // a posted command that throws is dropped; later ones run
    e.post([] { throw std::bad_alloc(); });
    int ran = 0;
    e.run_sync([&] { ran = 1; });
    EXPECT_EQ(ran, 1);
}

TEST(Engine, ForkedChildNeverWaits) {
    auto *e = new Engine();
    ASSERT_TRUE(e->ok());
    auto probe = std::make_shared<Probe>(false);
    uint64_t key = e->add(probe->fd.get(), EPOLLIN, probe);
    ASSERT_NE(key, 0u);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::alarm(5);  // a wait that never ends fails the test instead of hanging it
        int bad = 0;
        if (!e->foreign() || e->owner() != ::getppid()) bad |= 1;
        bool ran = false;
        e->run_sync([&] { ran = true; });
        if (ran) bad |= 2;
        if (e->add(probe->fd.get(), EPOLLIN, probe) != 0) bad |= 4;
        e->post([] {});
        e->add_timer(Clock::now(), probe);
        e->modify(probe->fd.get(), key, 0);
        e->remove(key);
        delete e;  // neither joins nor terminates
        ::_exit(bad);
    }
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st)) << "the child died of signal " << WTERMSIG(st);
    EXPECT_EQ(WEXITSTATUS(st), 0);
    // the child's modify and remove left the parent's registration alone
    probe->kick();
    EXPECT_TRUE(eventually([&] { return probe->events == 1; }));
    EXPECT_FALSE(e->foreign());
    e->remove(key);
    delete e;
}

namespace {

// Calls keep_spinning from its event, and from spin() while it still has `work` to find.
class Spinner : public Handler {
  public:
    explicit Spinner(Engine *e) : e_(e), fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
    void on_events(int, uint32_t) override {
        drain(fd);
        events++;
        e_->keep_spinning();
    }
    void spin(int f) override {
        EXPECT_EQ(f, fd.get());
        spins++;
        if (int w = work.load(); w > 0) {
            work = w - 1;
            e_->keep_spinning();
        }
    }
    void spin_end(int) override { ends++; }

    Engine *e_;
    Fd fd;
    std::atomic<int> events{0}, spins{0}, ends{0}, work{0};
};

// RPMA_SPIN_US for the engines made in one scope
class SpinEnv {
  public:
    explicit SpinEnv(const char *v) { ::setenv("RPMA_SPIN_US", v, 1); }
    ~SpinEnv() { ::unsetenv("RPMA_SPIN_US"); }
};

}  // namespace

TEST(EngineSpin, AfterWorkItPollsForAWhileThenSleepsAgain) {
    SpinEnv env("2000");  // 2 ms: long enough to count turns on a busy machine
    Engine e;
    ASSERT_TRUE(e.spins());
    auto s = std::make_shared<Spinner>(&e);
    uint64_t key = e.add(s->fd.get(), EPOLLIN, s);
    EXPECT_EQ(s->spins, 0);
    uint64_t one = 1;
    ASSERT_EQ(::write(s->fd.get(), &one, sizeof(one)), 8);
    ASSERT_TRUE(eventually([&] { return s->ends == 1; }));
    EXPECT_EQ(s->events, 1);
    EXPECT_GT(s->spins, 0);
    // the window passed without work: asleep, no more turns
    int turns = s->spins;
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(s->spins, turns);
    EXPECT_EQ(s->ends, 1);
    // work found while spinning keeps it spinning: each find extends the window
    s->work = 3;
    ASSERT_EQ(::write(s->fd.get(), &one, sizeof(one)), 8);
    ASSERT_TRUE(eventually([&] { return s->ends == 2; }));
    EXPECT_EQ(s->work, 0);
    e.remove(key);
}

TEST(EngineSpin, AZeroWindowNeverSpins) {
    SpinEnv env("0");
    Engine e;
    EXPECT_FALSE(e.spins());
    auto s = std::make_shared<Spinner>(&e);
    uint64_t key = e.add(s->fd.get(), EPOLLIN, s);
    uint64_t one = 1;
    ASSERT_EQ(::write(s->fd.get(), &one, sizeof(one)), 8);
    ASSERT_TRUE(eventually([&] { return s->events == 1; }));
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(s->spins, 0);
    EXPECT_EQ(s->ends, 0);
    e.remove(key);
}

TEST(EngineSpin, OutsideACallbackKeepSpinningDoesNothing) {
    SpinEnv env("2000");
    Engine e;
    auto s = std::make_shared<Spinner>(&e);
    uint64_t key = e.add(s->fd.get(), EPOLLIN, s);
    e.run_sync([&] { e.keep_spinning(); });  // a command is no handler's callback
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(s->spins, 0);
    e.remove(key);
}

namespace {

// The CPU the engine thread and CoreTaker's helper share: the first this process may use.
int shared_cpu() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) return c;
    return 0;
}

bool pin(pid_t tid, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return ::sched_setaffinity(tid, sizeof(set), &set) == 0;
}

// Takes a thread's core from it for a moment, as the scheduler does for another thread that
// wants it: a helper pinned to the same core is woken, and the thread yields until the helper
// has run. A yield that switches is an involuntary switch (getrusage's ru_nivcsw), as a
// preemption is; the thread must be pinned to cpu() first.
class CoreTaker {
  public:
    CoreTaker() : cpu_(shared_cpu()) {
        helper_ = std::thread([this] {
            bool pinned = pin(0, cpu_);
            std::unique_lock lk(mu_);
            ok_ = pinned;
            ready_ = true;
            cv_.notify_all();
            for (;;) {
                cv_.wait(lk, [&] { return go_ || stop_; });
                if (stop_) return;
                go_ = false;
                ran_ = true;
            }
        });
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return ready_; });
    }
    ~CoreTaker() {
        {
            std::lock_guard lk(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        helper_.join();
    }
    int cpu() const noexcept { return cpu_; }
    bool ok() {
        std::lock_guard lk(mu_);
        return ok_;
    }
    void take() {
        {
            std::lock_guard lk(mu_);
            go_ = true;
        }
        cv_.notify_all();
        for (;;) {
            {
                std::lock_guard lk(mu_);
                if (ran_) break;
            }
            ::sched_yield();
        }
        std::lock_guard lk(mu_);
        ran_ = false;
    }

  private:
    const int cpu_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool ready_ = false, ok_ = false, go_ = false, ran_ = false, stop_ = false;
    std::thread helper_;
};

// What the first request's timer does to the engine's polling turn (Poller).
enum class Slow { kNone, kSleep, kPreempt };

// A socket stream's handler: each event is a request served, and asks the engine to poll. Where
// a Slow is given, the first event calls keep_polling 4 times (the window opened, then 3 found)
// and sets a timer 1 ms on that makes the turn slow: kSleep sleeps 1 ms (a turn slowed with no
// other thread on the core, as a vCPU the hypervisor ran something else on looks), kPreempt also
// has CoreTaker take the core first (a turn the scheduler gave to another thread).
class Poller : public Handler {
  public:
    Poller(Engine *e, Slow slow, CoreTaker *taker)
        : e_(e), slow_(slow), taker_(taker), fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
    void on_events(int, uint32_t) override {
        drain(fd);
        bool first = events++ == 0;
        bool slow = first && slow_ != Slow::kNone;
        for (int i = 0; i < (slow ? 4 : 1); ++i) e_->keep_polling();
        if (slow) e_->add_timer(Clock::now() + 1ms, self);
    }
    void on_timer() override {
        if (slow_ == Slow::kPreempt) taker_->take();
        std::this_thread::sleep_for(1ms);
    }
    Engine *e_;
    const Slow slow_;
    CoreTaker *taker_;
    Fd fd;
    std::weak_ptr<Handler> self;
    std::atomic<int> events{0};
};

// An engine with one Poller, RPMA_SPIN_US = window: requests one at a time, each followed by the
// engine asleep again, and the engine's turns that did not sleep. kPreempt pins the engine
// thread to the CoreTaker's core; kSleep makes it SCHED_FIFO on one core, so that no other
// thread can take the core from it (ok() false where that is not permitted).
class PollBench {
  public:
    PollBench(const char *window, Slow slow = Slow::kNone) : env_(window) {
        if (slow == Slow::kPreempt) taker_ = std::make_unique<CoreTaker>();
        p_ = std::make_shared<Poller>(&e_, slow, taker_.get());
        p_->self = p_;
        key_ = e_.add(p_->fd.get(), EPOLLIN | EPOLLET, p_);
        e_.run_sync([&] { tid_ = ::gettid(); });
        if (slow == Slow::kPreempt) ok_ = pin(tid_, taker_->cpu());
        if (slow == Slow::kSleep) {
            sched_param sp{};
            sp.sched_priority = 1;
            ok_ = pin(tid_, shared_cpu()) && ::sched_setscheduler(tid_, SCHED_FIFO, &sp) == 0;
        }
    }
    ~PollBench() { e_.remove(key_); }
    bool ok() const noexcept { return ok_ && (!taker_ || taker_->ok()); }
    // The n-th request, served and the engine asleep after it: only a window that ended sleeps.
    void request(int n) {
        uint64_t one = 1;
        ASSERT_EQ(::write(p_->fd.get(), &one, sizeof(one)), 8);
        ASSERT_TRUE(eventually([&] { return p_->events == n; }));
        ASSERT_TRUE(eventually([&] { return test::ThreadState(tid_) == 'S'; }));
    }
    uint64_t looks() {
        uint64_t n = 0;
        e_.run_sync([&] { n = e_.busy_looks(); });
        return n;
    }

  private:
    SpinEnv env_;  // before the engine, which reads it as it starts
    std::unique_ptr<CoreTaker> taker_;
    Engine e_;
    std::shared_ptr<Poller> p_;
    uint64_t key_ = 0;
    pid_t tid_ = 0;
    bool ok_ = true;
};

}  // namespace

// A window that passes without a request costs the peer the core it may need to send one: after
// such a window the engine serves requests by waking up, and tries one window again after
// kPollRetry (64) of them.
TEST(EnginePoll, AfterAWindowThatFoundNothingItSleepsUntilTheRetry) {
    PollBench b("1000");
    ASSERT_NO_FATAL_FAILURE(b.request(1));
    uint64_t after_first = b.looks();
    EXPECT_GT(after_first, 0u) << "the first request opened no window";
    for (int i = 2; i <= 64; ++i) ASSERT_NO_FATAL_FAILURE(b.request(i));
    EXPECT_EQ(b.looks(), after_first) << "the engine polled again after a window found nothing";
    ASSERT_NO_FATAL_FAILURE(b.request(65));
    EXPECT_GT(b.looks(), after_first) << "the engine never tried polling again";
}

// A window whose score would outlive its end (3 found, 2 for the end) still stops polling when
// the engine finds another thread was given its core: the next request is served by waking up.
TEST(EnginePoll, APreemptedWindowStopsPolling) {
    PollBench b("10000", Slow::kPreempt);
    ASSERT_TRUE(b.ok()) << "could not pin the engine and the helper to one core";
    ASSERT_NO_FATAL_FAILURE(b.request(1));
    uint64_t after_first = b.looks();
    ASSERT_GT(after_first, 0u);
    ASSERT_NO_FATAL_FAILURE(b.request(2));
    EXPECT_EQ(b.looks(), after_first) << "the engine polled again after a preempted window";
}

// A turn as slow, with no other thread on the core (as a VM's stolen vCPU looks), leaves the
// window to its score: it ends empty (3 found, 2 for the end) and the next request polls again.
TEST(EnginePoll, ASlowTurnWithNoOtherThreadOnTheCoreKeepsPolling) {
    PollBench b("10000", Slow::kSleep);
    if (!b.ok()) GTEST_SKIP() << "SCHED_FIFO is not permitted here (needs CAP_SYS_NICE)";
    ASSERT_NO_FATAL_FAILURE(b.request(1));
    uint64_t after_first = b.looks();
    ASSERT_GT(after_first, 0u);
    ASSERT_NO_FATAL_FAILURE(b.request(2));
    EXPECT_GT(b.looks(), after_first) << "a slow turn alone stopped the engine's polling";
}
