// DriveTurn: a waiter that finds the completer owned by another thread's sleep sleeps on its own
// CQ, and wakes for its own completion or when the completer is let go; never for neither.
#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "provider/rc/drive_turn.h"
#include "provider/rc/task.h"
#include "provider/soft/cq.h"

namespace rpma::rc {
namespace {

constexpr auto kBound = std::chrono::seconds(10);

class DriveTurnTest : public ::testing::Test {
  protected:
    std::future<void> Wait() {
        return std::async(std::launch::async, [this] {
            CancelOff off;
            turn_.wait(cq_, ch_.fd(), owned_, off);
        });
    }
    static ibv_wc Wc() {
        ibv_wc wc{};
        wc.wr_id = 7;
        return wc;
    }

    ComplChannel ch_;
    Cq cq_{&ch_, false};
    Task owned_;  // as another waiter's drive holds it across its poll
    DriveTurn turn_;
};

TEST_F(DriveTurnTest, AFreeCompleterIsTheWaitersTurnAtOnce) {
    EXPECT_EQ(Wait().wait_for(kBound), std::future_status::ready);
}

TEST_F(DriveTurnTest, AWaiterWakesForItsOwnCompletionWhileTheOtherSleeps) {
    ASSERT_TRUE(owned_.try_own());
    cq_.disarm();  // as the owner of another CQ's wait leaves this one
    auto w = Wait();
    EXPECT_EQ(w.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
    cq_.push(Wc());  // the owner's read completes this CQ's request
    EXPECT_EQ(w.wait_for(kBound), std::future_status::ready);
    EXPECT_FALSE(owned_.finish());
}

TEST_F(DriveTurnTest, AWaiterWakesWhenTheCompleterIsLetGo) {
    ASSERT_TRUE(owned_.try_own());
    auto w = Wait();
    EXPECT_EQ(w.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
    EXPECT_FALSE(owned_.finish());
    turn_.let_go();
    EXPECT_EQ(w.wait_for(kBound), std::future_status::ready);
}

TEST_F(DriveTurnTest, ACompletionAlreadyThereEndsTheWait) {
    ASSERT_TRUE(owned_.try_own());
    cq_.disarm();
    cq_.push(Wc());
    EXPECT_EQ(Wait().wait_for(kBound), std::future_status::ready);
    EXPECT_FALSE(owned_.finish());
}

// Each counted sleeper gets its own wake from one let_go (a semaphore): none takes another's
// and leaves it asleep with nobody owning the completer.
TEST_F(DriveTurnTest, EverySleeperWakesOnOneLetGo) {
    for (int i = 0; i < 200; i++) {
        ASSERT_TRUE(owned_.try_own());
        auto w1 = Wait(), w2 = Wait();
        EXPECT_FALSE(owned_.finish());
        turn_.let_go();
        ASSERT_EQ(w1.wait_for(kBound), std::future_status::ready) << "round " << i;
        ASSERT_EQ(w2.wait_for(kBound), std::future_status::ready) << "round " << i;
    }
}

// A let_go between the waiter's count and its sleep is not lost (the fences' pairing): many
// rounds of a waiter against a releaser, each bounded.
TEST_F(DriveTurnTest, NoLetGoIsLostToARace) {
    for (int i = 0; i < 2000; i++) {
        ASSERT_TRUE(owned_.try_own());
        auto w = Wait();
        EXPECT_FALSE(owned_.finish());
        turn_.let_go();
        ASSERT_EQ(w.wait_for(kBound), std::future_status::ready) << "round " << i;
    }
}

}  // namespace
}  // namespace rpma::rc
