// rc::Connection, the CM state of an RC queue pair (docs/rc-rebuild.md): each transition, made
// once, and the deadlines.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "provider/rc/connection.h"

namespace {

using rpma::Clock;
using rpma::FdQueue;
using rpma::rc::Connection;
using Cm = Connection::Cm;
using Due = Connection::Due;
using Posts = Connection::Posts;
using Disconnect = Connection::Disconnect;

class RcConnectionTest : public ::testing::Test {
  protected:
    FdQueue<rpma_conn_event> events_;
    Connection conn_{&events_, 2};
    const Clock::time_point t0_ = Clock::now();
};

TEST_F(RcConnectionTest, TheClientConnectsAwaitsTheReplyAndTakesIt) {
    EXPECT_EQ(conn_.state(), Cm::kIdle);
    EXPECT_EQ(conn_.posts(), Posts::kNotYet);
    EXPECT_FALSE(conn_.await_reply(t0_));  // not connecting
    conn_.begin_connect(t0_ + std::chrono::seconds(5));
    EXPECT_EQ(conn_.state(), Cm::kConnecting);
    EXPECT_FALSE(conn_.take_reply());  // no reply awaited yet
    EXPECT_TRUE(conn_.await_reply(t0_ + std::chrono::seconds(10)));
    EXPECT_FALSE(conn_.await_reply(t0_));  // once
    EXPECT_EQ(conn_.posts(), Posts::kNotYet);
    EXPECT_TRUE(conn_.take_reply());
    EXPECT_FALSE(conn_.take_reply());
    EXPECT_TRUE(conn_.established());
    EXPECT_EQ(conn_.posts(), Posts::kOpen);
}

TEST_F(RcConnectionTest, TheServerAcceptsWithThePeersNumberAndData) {
    conn_.set_peer(42, {1, 2, 3});
    conn_.accept();
    EXPECT_TRUE(conn_.established());
    EXPECT_EQ(conn_.remote_qp(), 42u);
    EXPECT_EQ(conn_.remote_pdata(), (std::vector<uint8_t>{1, 2, 3}));
}

TEST_F(RcConnectionTest, AFailedSetUpEndsOnce) {
    conn_.begin_connect(t0_);
    EXPECT_TRUE(conn_.mark_failed());
    EXPECT_FALSE(conn_.mark_failed());
    EXPECT_EQ(conn_.state(), Cm::kDone);
    EXPECT_FALSE(conn_.take_reply());  // a late reply finds it failed
    EXPECT_EQ(conn_.posts(), Posts::kFlushed);
}

TEST_F(RcConnectionTest, ALossIsReportedOnceAndNotWhileClosing) {
    conn_.accept();
    EXPECT_TRUE(conn_.mark_lost());
    EXPECT_FALSE(conn_.mark_lost());
    EXPECT_EQ(conn_.posts(), Posts::kFlushed);

    FdQueue<rpma_conn_event> events;
    Connection closing(&events, 2);
    closing.accept();
    EXPECT_TRUE(closing.begin_close(t0_));
    EXPECT_FALSE(closing.mark_lost());  // an orderly close ends on its own
    EXPECT_EQ(closing.state(), Cm::kClosing);
}

TEST_F(RcConnectionTest, OfTwoThreadsThatFindItLostOneReportsIt) {
    for (int round = 0; round < 200; ++round) {
        FdQueue<rpma_conn_event> events;
        Connection c(&events, 2);
        c.accept();
        std::atomic<int> reported{0};
        std::atomic<bool> go{false};
        auto lose = [&] {
            while (!go.load()) {
            }
            if (c.mark_lost()) reported.fetch_add(1);
        };
        std::thread a(lose), b(lose);
        go.store(true);
        a.join();
        b.join();
        ASSERT_EQ(reported.load(), 1);
    }
}

TEST_F(RcConnectionTest, CloseIsGracefulOnlyWhenEstablished) {
    EXPECT_FALSE(conn_.closed());
    EXPECT_FALSE(conn_.begin_close(t0_));  // idle: done at once
    EXPECT_TRUE(conn_.closed());
    EXPECT_EQ(conn_.state(), Cm::kDone);

    FdQueue<rpma_conn_event> events;
    Connection live(&events, 2);
    live.accept();
    EXPECT_TRUE(live.begin_close(t0_));
    EXPECT_EQ(live.state(), Cm::kClosing);
    EXPECT_EQ(live.posts(), Posts::kFlushed);
    EXPECT_EQ(live.request_disconnect(), Disconnect::kNothing);  // the close sends ours
}

TEST_F(RcConnectionTest, OurDisconnectIsAskedForOnceAndFlushesLaterPosts) {
    EXPECT_EQ(conn_.request_disconnect(), Disconnect::kNothing);  // not connected
    conn_.accept();
    EXPECT_EQ(conn_.request_disconnect(), Disconnect::kSend);
    EXPECT_EQ(conn_.request_disconnect(), Disconnect::kNothing);
    EXPECT_TRUE(conn_.established());
    EXPECT_EQ(conn_.posts(), Posts::kFlushed);
}

// rdma_disconnect during set-up puts the QP in error: the reply can no longer establish it
TEST_F(RcConnectionTest, ADisconnectDuringSetUpEndsItAndTheReplyEstablishesNothing) {
    for (bool replied : {false, true}) {
        FdQueue<rpma_conn_event> events;
        Connection c(&events, 2);
        c.begin_connect(t0_ + std::chrono::seconds(5));
        if (replied) {
            ASSERT_TRUE(c.await_reply(t0_ + std::chrono::seconds(5)));
        }
        EXPECT_EQ(c.request_disconnect(), Disconnect::kEndSetup);
        EXPECT_EQ(c.request_disconnect(), Disconnect::kNothing);
        EXPECT_FALSE(c.take_reply());
        EXPECT_FALSE(c.established());
        EXPECT_TRUE(c.mark_failed());  // the queue pair's fail_connect reports it once
        EXPECT_EQ(c.posts(), Posts::kFlushed);
    }
}

TEST_F(RcConnectionTest, OurDisconnectFramesAreQueuedOnce) {
    EXPECT_TRUE(conn_.take_disconnect());
    EXPECT_FALSE(conn_.take_disconnect());
}

TEST_F(RcConnectionTest, ThePeersDisconnectIsAnsweredOnceAndEndsWithBothStreams) {
    conn_.accept();
    int answers = 0;
    bool both = false;
    auto answer = [&] { ++answers; };
    auto both_in = [&] { return both; };
    EXPECT_FALSE(conn_.peer_disconnect(answer, both_in));  // one stream so far
    EXPECT_EQ(answers, 1);
    EXPECT_TRUE(conn_.established());
    both = true;
    EXPECT_TRUE(conn_.peer_disconnect(answer, both_in));
    EXPECT_EQ(answers, 1);  // answered once
    EXPECT_EQ(conn_.state(), Cm::kDone);
    EXPECT_FALSE(conn_.peer_disconnect(answer, both_in));  // done: nothing more
}

TEST_F(RcConnectionTest, APeerDisconnectAfterOursIsNotAnswered) {
    conn_.accept();
    ASSERT_EQ(conn_.request_disconnect(), Disconnect::kSend);
    int answers = 0;
    EXPECT_TRUE(conn_.peer_disconnect([&] { ++answers; }, [] { return true; }));
    EXPECT_EQ(answers, 0);
}

TEST_F(RcConnectionTest, TheSetUpDeadline) {
    conn_.begin_connect(t0_ + std::chrono::seconds(1));
    EXPECT_EQ(conn_.due(t0_), Due::kNothing);
    EXPECT_EQ(conn_.due(t0_ + std::chrono::seconds(1)), Due::kSetupTimedOut);
    ASSERT_TRUE(conn_.await_reply(t0_ + std::chrono::seconds(3)));  // the reply's own deadline
    EXPECT_EQ(conn_.due(t0_ + std::chrono::seconds(2)), Due::kNothing);
    EXPECT_EQ(conn_.due(t0_ + std::chrono::seconds(3)), Due::kSetupTimedOut);
    ASSERT_TRUE(conn_.take_reply());
    EXPECT_EQ(conn_.due(t0_ + std::chrono::seconds(9)), Due::kNothing);
}

TEST_F(RcConnectionTest, TheLastAnswersDeadlineIsSetOnce) {
    conn_.accept();
    EXPECT_EQ(conn_.due(t0_ + std::chrono::hours(1)), Due::kNothing);  // none set
    EXPECT_TRUE(conn_.set_answers_due(t0_ + std::chrono::seconds(1)));
    EXPECT_FALSE(conn_.set_answers_due(t0_ + std::chrono::seconds(9)));  // the first stays
    EXPECT_EQ(conn_.due(t0_), Due::kNothing);
    EXPECT_EQ(conn_.due(t0_ + std::chrono::seconds(1)), Due::kAnswersOverdue);
    ASSERT_TRUE(conn_.mark_lost());
    EXPECT_EQ(conn_.due(t0_ + std::chrono::seconds(1)), Due::kNothing);
}

TEST_F(RcConnectionTest, TheLingerDeadlineOutlivesTheClose) {
    conn_.accept();
    conn_.set_answers_due(t0_);
    ASSERT_TRUE(conn_.begin_close(t0_ + std::chrono::seconds(2)));
    EXPECT_EQ(conn_.due(t0_ + std::chrono::seconds(1)), Due::kNothing);  // closed: no loss
    EXPECT_EQ(conn_.due(t0_ + std::chrono::seconds(2)), Due::kLingerOver);
}

TEST_F(RcConnectionTest, AClosedConnectionReportsNoSetUpTimeout) {
    conn_.begin_connect(t0_);
    conn_.begin_close(t0_ + std::chrono::seconds(2));
    EXPECT_EQ(conn_.due(t0_ + std::chrono::seconds(5)), Due::kNothing);
}

TEST_F(RcConnectionTest, EventsGoToTheQueue) {
    conn_.post(RPMA_CONN_ESTABLISHED);
    conn_.post(RPMA_CONN_CLOSED);
    EXPECT_EQ(events_.pop(), RPMA_CONN_ESTABLISHED);
    EXPECT_EQ(events_.pop(), RPMA_CONN_CLOSED);
}

}  // namespace
