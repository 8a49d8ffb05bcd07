// take_when_readable (common/fd.h) and the FdQueue built on it: a blocking take whose only
// cancellation point is a poll that takes nothing, so a cancelled waiter never leaves with an
// event or a queue's unit. Deterministic: a cancel is made pending before the call, so it lands
// on the first cancellation point whatever the scheduling.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <thread>

#include "../support/cancel_state.h"
#include "common/fd.h"
#include "common/fd_queue.h"
#include "common/sanitizer.h"

namespace rpma {
namespace {

using test::cancellation_on;

uint64_t units(int fd) {  // what a semaphore eventfd holds, taken
    uint64_t n = 0, v = 0;
    while (::read(fd, &v, sizeof(v)) == sizeof(v)) n += v;
    return n;
}

void post(int fd) {
    uint64_t one = 1;
    ASSERT_EQ(::write(fd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
}

// A sanitizer's runtime does not live through a cancellation's unwind (threads.cancel is not
// built under one either): ASan fails on the thread's alternate signal stack, TSan on the locks.
constexpr bool kCancelUnwinds = !kAddressSanitizer && !kThreadSanitizer;

// Runs fn(arg) on a thread of its own, which must end cancelled.
void expect_cancelled(void *(*fn)(void *), void *arg) {
    pthread_t th;
    ASSERT_EQ(::pthread_create(&th, nullptr, fn, arg), 0);
    void *res = nullptr;
    ASSERT_EQ(::pthread_join(th, &res), 0);
    EXPECT_EQ(res, PTHREAD_CANCELED);
}

struct Sleeper {
    int fd;
    std::mutex *mu;
    bool took = false;
};

// Runs a take on a blocking fd with a cancel already pending: the sleep's poll acts on it.
void *take_cancelled(void *arg) {
    auto *s = static_cast<Sleeper *>(arg);
    ::pthread_cancel(::pthread_self());
    take_when_readable(s->fd, *s->mu, false, [s] {
        s->took = true;
        uint64_t v;
        return ::read(s->fd, &v, sizeof(v)) == sizeof(v);
    });
    return nullptr;
}

TEST(FdTake, TheTakeRunsWithCancellationOffAndTheLockHeld) {
    Fd fd(::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC));  // blocking: the call sleeps first
    post(fd.get());
    std::mutex mu;
    ASSERT_TRUE(cancellation_on());
    bool off = false, locked = false;
    uint64_t v = 0;
    ssize_t r = take_when_readable(fd.get(), mu, ssize_t{-2}, [&] {
        off = !cancellation_on();
        std::thread([&] {
            locked = !mu.try_lock();
            if (!locked) mu.unlock();
        }).join();
        return ::read(fd.get(), &v, sizeof(v));
    });
    EXPECT_EQ(r, static_cast<ssize_t>(sizeof(v)));
    EXPECT_TRUE(off);
    EXPECT_TRUE(locked);
    EXPECT_TRUE(cancellation_on()) << "the caller's setting is back";
}

TEST(FdTake, ACancelledWaiterTakesNothing) {
    if (!kCancelUnwinds) GTEST_SKIP() << "a sanitizer's runtime does not survive the unwind";
    Fd fd(::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC | EFD_NONBLOCK));
    post(fd.get());
    // blocking for the waiter, non-blocking for the count afterwards
    ASSERT_TRUE(set_nonblocking(fd.get(), false));
    std::mutex mu;
    Sleeper s{fd.get(), &mu};
    expect_cancelled(take_cancelled, &s);
    EXPECT_FALSE(s.took);
    ASSERT_TRUE(set_nonblocking(fd.get(), true));
    EXPECT_EQ(units(fd.get()), 1u) << "the unit is still there";
}

// A non-blocking fd with nothing: none at once, and no take (one would find nothing, or block
// if the application made the fd blocking meanwhile).
TEST(FdTake, ANonBlockingFdWithNothingIsNoneWithoutATake) {
    Fd fd(::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC | EFD_NONBLOCK));
    std::mutex mu;
    int takes = 0;
    EXPECT_EQ(take_when_readable(fd.get(), mu, -1, [&] { return ++takes; }), -1);
    EXPECT_EQ(takes, 0);
    post(fd.get());
    EXPECT_EQ(take_when_readable(fd.get(), mu, -1, [&] { return ++takes; }), 1);
}

// A hang-up without input wakes the sleep and reaches the take, which reports it (no spin).
TEST(FdTake, AHangUpReachesTheTake) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    Fd rd(p[0]);
    ::close(p[1]);
    std::mutex mu;
    char c;
    EXPECT_EQ(
        take_when_readable(rd.get(), mu, ssize_t{-2}, [&] { return ::read(rd.get(), &c, 1); }), 0);
}

struct QueueSleeper {
    FdQueue<int> *q;
    bool got = false;
};

void *pop_cancelled(void *arg) {
    auto *s = static_cast<QueueSleeper *>(arg);
    ::pthread_cancel(::pthread_self());
    s->got = s->q->pop().has_value();
    return nullptr;
}

TEST(FdTake, ACancelledPopLeavesTheItemQueued) {
    if (!kCancelUnwinds) GTEST_SKIP() << "a sanitizer's runtime does not survive the unwind";
    FdQueue<int> q;
    ASSERT_TRUE(q.valid());
    ASSERT_FALSE(q.nonblocking());
    q.push(7);
    QueueSleeper s{&q};
    expect_cancelled(pop_cancelled, &s);
    EXPECT_FALSE(s.got);
    EXPECT_EQ(q.try_pop(), std::optional<int>(7));
    EXPECT_FALSE(readable_now(q.fd())) << "its unit went with it";
}

// drain() leaves units without items: a pop then takes the unit and says nothing was there.
TEST(FdTake, APopAfterADrainTakesTheUnitAndReturnsNothing) {
    FdQueue<int> q;
    q.push(1);
    EXPECT_EQ(q.drain().size(), 1u);
    EXPECT_EQ(q.pop(), std::nullopt);
    EXPECT_FALSE(readable_now(q.fd()));
}

}  // namespace
}  // namespace rpma
