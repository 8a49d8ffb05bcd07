// The progress engine: a handler that throws does not end the process or the loop, and in a
// forked child nothing waits for the parent's engine thread.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
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

// A socket stream's handler: each event is a request served, and asks the engine to poll. With
// preempt_first, the first event calls keep_polling 4 times (the window opened, then 3 found)
// and sets a timer that sleeps 1 ms: to the engine, a turn preempted while it polled.
class Poller : public Handler {
  public:
    Poller(Engine *e, bool preempt_first)
        : e_(e), preempt_first_(preempt_first), fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
    void on_events(int, uint32_t) override {
        drain(fd);
        bool first = events++ == 0;
        for (int i = 0; i < (first && preempt_first_ ? 4 : 1); ++i) e_->keep_polling();
        if (first && preempt_first_) e_->add_timer(Clock::now() + 1ms, self);
    }
    void on_timer() override { std::this_thread::sleep_for(1ms); }
    Engine *e_;
    const bool preempt_first_;
    Fd fd;
    std::weak_ptr<Handler> self;
    std::atomic<int> events{0};
};

// An engine with one Poller, RPMA_SPIN_US = window: requests one at a time, each followed by the
// engine asleep again, and the engine's turns that did not sleep.
class PollBench {
  public:
    PollBench(const char *window, bool preempt_first) : env_(window) {
        p_ = std::make_shared<Poller>(&e_, preempt_first);
        p_->self = p_;
        key_ = e_.add(p_->fd.get(), EPOLLIN | EPOLLET, p_);
        e_.run_sync([&] { tid_ = ::gettid(); });
    }
    ~PollBench() { e_.remove(key_); }
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
    Engine e_;
    std::shared_ptr<Poller> p_;
    uint64_t key_ = 0;
    pid_t tid_ = 0;
};

}  // namespace

// A window that passes without a request costs the peer the core it may need to send one: after
// such a window the engine serves requests by waking up, and tries one window again after
// kPollRetry (64) of them.
TEST(EnginePoll, AfterAWindowThatFoundNothingItSleepsUntilTheRetry) {
    PollBench b("1000", false);
    ASSERT_NO_FATAL_FAILURE(b.request(1));
    uint64_t after_first = b.looks();
    EXPECT_GT(after_first, 0u) << "the first request opened no window";
    for (int i = 2; i <= 64; ++i) ASSERT_NO_FATAL_FAILURE(b.request(i));
    EXPECT_EQ(b.looks(), after_first) << "the engine polled again after a window found nothing";
    ASSERT_NO_FATAL_FAILURE(b.request(65));
    EXPECT_GT(b.looks(), after_first) << "the engine never tried polling again";
}

// A window whose score would outlive its end (3 found, 2 for the end) still stops polling when
// the engine finds it was kept off the core: the next request is served by waking up.
TEST(EnginePoll, APreemptedWindowStopsPolling) {
    PollBench b("10000", true);
    ASSERT_NO_FATAL_FAILURE(b.request(1));
    uint64_t after_first = b.looks();
    ASSERT_GT(after_first, 0u);
    ASSERT_NO_FATAL_FAILURE(b.request(2));
    EXPECT_EQ(b.looks(), after_first) << "the engine polled again after a preempted window";
}
