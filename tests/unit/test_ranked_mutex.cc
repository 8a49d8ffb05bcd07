// The lock-order check: taking a mutex while holding one of the same or a higher rank aborts in
// builds that check (Debug and sanitizers), and costs nothing elsewhere.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "common/ranked_mutex.h"

using rpma::RankedMutex;

TEST(RankedMutex, InOrderAndTryLockWork) {
    RankedMutex a{0}, b{1}, c{3};
    {
        std::lock_guard la(a);
        std::lock_guard lb(b);
        std::unique_lock lc(c, std::try_to_lock);
        EXPECT_TRUE(lc.owns_lock());
    }
    std::lock_guard lc(c);  // all released: any rank may be taken again
}

namespace {
// The hook is process-wide: it records only the mutex under test, and each run starts from none
// seen, so a repeated run (a new mutex, maybe at the same address) inherits nothing.
std::atomic<const RankedMutex *> g_watched{nullptr};
std::atomic<const RankedMutex *> g_waited_for{nullptr};
}  // namespace

TEST(RankedMutex, WaitHookRunsBeforeAContendedLockWaits) {
    RankedMutex m{0};
    g_waited_for = nullptr;
    g_watched = &m;
    RankedMutex::set_wait_hook([](const RankedMutex *w) {
        if (w == g_watched.load()) g_waited_for = w;
    });
    {
        std::lock_guard free(m);  // uncontended: no hook
    }
    EXPECT_EQ(g_waited_for.load(), nullptr);
    std::unique_lock held(m);
    auto other = std::async(std::launch::async, [&] { std::lock_guard lk(m); });
    while (g_waited_for.load() != &m) std::this_thread::yield();  // the hook ran: it waits now
    held.unlock();
    other.get();
    RankedMutex::set_wait_hook(nullptr);
    g_watched = nullptr;
}

#ifdef RPMA_CHECK_LOCK_ORDER
namespace {

void lock_out_of_order() {
    RankedMutex low{0};
    RankedMutex high{2};
    std::lock_guard lh(high);
    std::lock_guard ll(low);
}

void lock_same_rank_twice() {
    RankedMutex one{3};
    RankedMutex other{3};
    std::lock_guard l1(one);
    std::lock_guard l2(other);
}

}  // namespace

TEST(RankedMutexDeathTest, OutOfOrderAborts) {
    EXPECT_DEATH(lock_out_of_order(), "lock order violated: rank 0 taken while holding 0x4");
}

TEST(RankedMutexDeathTest, SameRankTwiceAborts) {
    EXPECT_DEATH(lock_same_rank_twice(), "lock order violated");
}
#else
TEST(RankedMutexDeathTest, OutOfOrderAborts) {
    GTEST_SKIP() << "the lock order is checked in Debug and sanitizer builds only";
}
#endif
