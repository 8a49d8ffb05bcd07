// rc::Task, the run state of one RC role (docs/rc-rebuild.md): one runner at a time, no lost
// schedule, no waiting.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "provider/rc/task.h"

namespace {

using rpma::rc::Task;
using State = Task::State;

TEST(RcTask, AScheduleDuringARunMakesTheRunnerPassAgain) {
    Task t;
    ASSERT_TRUE(t.schedule());  // idle: this caller runs it
    EXPECT_EQ(t.state(), State::kRunning);
    EXPECT_FALSE(t.schedule());  // someone runs it: armed, not run here
    EXPECT_EQ(t.state(), State::kArmed);
    EXPECT_FALSE(t.schedule());  // armed stays armed
    EXPECT_TRUE(t.finish());     // pass again
    EXPECT_EQ(t.state(), State::kRunning);
    EXPECT_FALSE(t.finish());  // nothing came: idle
    EXPECT_EQ(t.state(), State::kIdle);
    EXPECT_TRUE(t.schedule());
}

TEST(RcTask, RunTaskPassesOncePerScheduleThatLandsDuringIt) {
    Task t;
    int passes = 0;
    EXPECT_TRUE(rpma::rc::run_task(t, [&] {
        if (++passes == 1) {
            EXPECT_FALSE(t.schedule());  // lands during the pass
        }
        return true;
    }));
    EXPECT_EQ(passes, 2);
    EXPECT_EQ(t.state(), State::kIdle);
}

TEST(RcTask, AHandedOnRunStaysOwnedUntilItsNewRunnerFinishes) {
    Task t;
    int passes = 0;
    // the first pass spends its budget and hands the run on
    EXPECT_TRUE(rpma::rc::run_task(t, [&] { return ++passes > 1; }));
    EXPECT_EQ(passes, 1);
    EXPECT_EQ(t.state(), State::kRunning);
    EXPECT_FALSE(rpma::rc::run_task(t, [&] { return ++passes > 0; }));  // not a second runner
    EXPECT_EQ(passes, 1);
    EXPECT_EQ(t.state(), State::kArmed);
    rpma::rc::run_passes(t, [&] { return ++passes > 0; });  // whoever took the hand-off
    EXPECT_EQ(passes, 3);                                   // its pass, then the armed one
    EXPECT_EQ(t.state(), State::kIdle);
}

TEST(RcTask, TryOwnTakesOnlyAnIdleTaskAndNeverArmsARunningOne) {
    Task t;
    ASSERT_TRUE(t.try_own());
    EXPECT_FALSE(t.try_own());  // a poller finds it owned: nothing, not armed
    EXPECT_EQ(t.state(), State::kRunning);
    EXPECT_FALSE(t.finish());
    EXPECT_TRUE(t.try_own());
}

// A waiter (drive) waits for its turn: wait_idle returns once the runner's last pass ends.
TEST(RcTask, WaitIdleReturnsWhenTheRunnerLetsGo) {
    Task t;
    ASSERT_TRUE(t.schedule());
    std::atomic<bool> released{false};
    std::thread waiter([&] {
        while (!t.try_own()) t.wait_idle();
        EXPECT_TRUE(released.load());
        EXPECT_FALSE(t.finish());
    });
    EXPECT_FALSE(t.schedule());  // armed: the runner passes again first
    EXPECT_TRUE(t.finish());
    released.store(true);
    EXPECT_FALSE(t.finish());
    waiter.join();
    EXPECT_EQ(t.state(), State::kIdle);
}

TEST(RcTask, StoppingAnIdleTaskStopsItAtOnce) {
    Task t;
    EXPECT_TRUE(t.stop());
    EXPECT_EQ(t.state(), State::kStopped);
    EXPECT_FALSE(t.schedule());
    EXPECT_TRUE(t.stop());
    EXPECT_EQ(t.state(), State::kStopped);
}

TEST(RcTask, StoppingARunningTaskStopsItWhenThePassEnds) {
    for (bool armed : {false, true}) {
        Task t;
        ASSERT_TRUE(t.schedule());
        if (armed) {
            EXPECT_FALSE(t.schedule());
        }
        EXPECT_FALSE(t.stop());  // the runner still owns it
        EXPECT_EQ(t.state(), State::kStopping);
        EXPECT_FALSE(t.stop());
        EXPECT_FALSE(t.schedule());  // no pass after the stop, armed or not
        EXPECT_FALSE(t.finish());
        EXPECT_EQ(t.state(), State::kStopped);
        EXPECT_TRUE(t.stop());
    }
}

// Four threads each add work and schedule; whichever wins runs passes that take all the work.
// Every added item must be taken (no schedule lost), and no two passes may overlap. `taken` is
// a plain variable on purpose: only the runner touches it, so TSan sees any second runner.
TEST(RcTask, ManySchedulersNeverMakeTwoRunnersOrLoseWork) {
    constexpr int kThreads = 4;
    constexpr uint64_t kEach = 50000;
    Task t;
    std::atomic<uint64_t> pending{0};
    std::atomic<int> in_pass{0};
    std::atomic<int> overlaps{0};
    uint64_t taken = 0;
    uint64_t passes = 0;
    std::atomic<bool> go{false};
    auto pass = [&] {
        if (in_pass.fetch_add(1) != 0) overlaps.fetch_add(1);
        taken += pending.exchange(0);
        if (++passes % 64 == 0) std::this_thread::yield();  // widens the window for schedules

        in_pass.fetch_sub(1);
        return true;
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; i++)
        threads.emplace_back([&] {
            while (!go.load()) std::this_thread::yield();
            for (uint64_t n = 0; n < kEach; n++) {
                pending.fetch_add(1);
                rpma::rc::run_task(t, pass);
            }
        });
    go.store(true);
    for (auto &th : threads) th.join();
    EXPECT_EQ(overlaps.load(), 0);
    EXPECT_EQ(pending.load(), 0u);
    EXPECT_EQ(taken, kThreads * kEach);
    EXPECT_GE(passes, 1u);
    EXPECT_EQ(t.state(), State::kIdle);
}

}  // namespace
