// verbs::CompletionQueue and CompletionChannel: polling (errors, the completion empty() holds
// back), waiting (shared channel, non-blocking, ibv_get_cq_event and re-arming failing) and
// the channel's own wait.
#include <cerrno>
#include <cstring>

#include "common/fd.h"
#include "provider/verbs/completion_channel.h"
#include "provider/verbs/completion_queue.h"
#include "provider/verbs/domain.h"
#include "verbs_test.h"

namespace rpma::test {
namespace {

using verbs::CompletionQueue;

class CqTest : public VerbsTest {
  protected:
    void SetUp() override {
        VerbsTest::SetUp();
        ASSERT_EQ(verbs::Domain::create(fake::context(), &dom_), 0);
        ASSERT_EQ(dom_->create_channel(&ch_), 0);
        ASSERT_EQ(dom_->create_cq(ch_.get(), false, 8, &cq_), 0);
    }
    void TearDown() override {
        cq_.reset();
        ch_.reset();
        dom_.reset();
        VerbsTest::TearDown();
    }
    ibv_cq *raw() const { return static_cast<CompletionQueue *>(cq_.get())->raw(); }
    static ibv_wc wc(uint64_t id) {
        ibv_wc w{};
        w.wr_id = id;
        w.status = IBV_WC_SUCCESS;
        return w;
    }

    std::unique_ptr<verbs::Domain> dom_;
    std::unique_ptr<prov::CompletionChannel> ch_;
    std::unique_ptr<prov::CompletionQueue> cq_;
};

TEST_F(CqTest, EmptyPollIsNoCompletion) {
    ibv_wc w[2];
    int got = -1;
    EXPECT_EQ(cq_->get_wc(2, w, &got), RPMA_E_NO_COMPLETION);
    EXPECT_EQ(got, -1);
}

TEST_F(CqTest, PollFails) {
    fake::fail("ibv_poll_cq", EIO);
    ibv_wc w[2];
    int got = -1;
    EXPECT_EQ(cq_->get_wc(2, w, &got), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("ibv_poll_cq", std::strerror(EIO)));
}

TEST_F(CqTest, HeldCompletionComesFirst) {
    fake::queue_wc(wc(1));
    fake::queue_wc(wc(2));
    EXPECT_FALSE(cq_->empty());
    EXPECT_FALSE(cq_->empty());  // still holding the first, without polling again
    EXPECT_EQ(fake::calls("ibv_poll_cq"), 1);
    ibv_wc w[3];
    int got = 0;
    ASSERT_EQ(cq_->get_wc(3, w, &got), 0);
    ASSERT_EQ(got, 2);
    EXPECT_EQ(w[0].wr_id, 1u);
    EXPECT_EQ(w[1].wr_id, 2u);
    EXPECT_TRUE(cq_->empty());
}

TEST_F(CqTest, PollFailureAfterTheHeldCompletionStillHandsItOut) {
    fake::queue_wc(wc(7));
    ASSERT_FALSE(cq_->empty());
    fake::fail("ibv_poll_cq", EIO);
    ibv_wc w[2];
    int got = 0;
    ASSERT_EQ(cq_->get_wc(2, w, &got), 0);
    EXPECT_EQ(got, 1);
    EXPECT_EQ(w[0].wr_id, 7u);
    EXPECT_TRUE(logged_error("ibv_poll_cq", std::strerror(EIO)));
}

TEST_F(CqTest, EmptyOnPollFailureSaysEmpty) {
    fake::fail("ibv_poll_cq", EIO);
    EXPECT_TRUE(cq_->empty());
}

TEST_F(CqTest, WaitTakesAnEventAcksAndRearms) {
    fake::fire(raw());
    int armed = fake::calls("ibv_req_notify_cq");
    EXPECT_EQ(cq_->wait(), 0);
    EXPECT_EQ(fake::acked_cq_events(), 1u);
    EXPECT_EQ(fake::calls("ibv_req_notify_cq"), armed + 1);
}

// The event is read and acknowledged with cancellation off: one read and then cancelled would
// never be acknowledged, and ibv_destroy_cq waits for it for ever.
TEST_F(CqTest, WaitReadsTheEventWithCancellationOff) {
    int fd = ch_->fd();
    ASSERT_TRUE(set_nonblocking(fd, false));                   // blocking, as verbs makes it
    int armed = fake::cancellable_calls("ibv_req_notify_cq");  // the CQ's creation armed it
    fake::fire(raw());
    EXPECT_EQ(cq_->wait(), 0);
    fake::fire(raw());
    EXPECT_NE(ch_->wait(), nullptr);
    EXPECT_EQ(fake::calls("ibv_get_cq_event"), 2);
    EXPECT_EQ(fake::cancellable_calls("ibv_get_cq_event"), 0);
    EXPECT_EQ(fake::cancellable_calls("ibv_ack_cq_events"), 0);
    EXPECT_EQ(fake::cancellable_calls("ibv_req_notify_cq"), armed) << "the re-arm, with them";
}

TEST_F(CqTest, WaitWithNothingOnANonBlockingChannel) {
    size_t before = log_count();
    EXPECT_EQ(cq_->wait(), RPMA_E_NO_COMPLETION);
    EXPECT_EQ(log_count(), before);  // EAGAIN is no error
}

TEST_F(CqTest, WaitFails) {
    fake::fire(raw());  // the fd reports something: only then is it read
    fake::fail("ibv_get_cq_event", EIO);
    EXPECT_EQ(cq_->wait(), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("ibv_get_cq_event", std::strerror(EIO)));
    EXPECT_EQ(fake::acked_cq_events(), 0u);
}

TEST_F(CqTest, RearmingAfterTheEventFails) {
    fake::fire(raw());
    fake::fail("ibv_req_notify_cq", EINVAL);
    EXPECT_EQ(cq_->wait(), RPMA_E_PROVIDER);
    EXPECT_EQ(fake::acked_cq_events(), 1u);  // the event taken is acknowledged all the same
    EXPECT_TRUE(logged_error("ibv_req_notify_cq", std::strerror(EINVAL)));
}

TEST_F(CqTest, ArmFailureIsLogged) {
    fake::fail("ibv_req_notify_cq", EINVAL);
    cq_->arm();
    EXPECT_TRUE(logged_error("ibv_req_notify_cq", std::strerror(EINVAL)));
}

TEST_F(CqTest, SharedChannelCannotBeWaitedOnThroughTheCq) {
    std::unique_ptr<prov::CompletionQueue> shared;
    ASSERT_EQ(dom_->create_cq(ch_.get(), true, 8, &shared), 0);
    EXPECT_EQ(shared->wait(), RPMA_E_SHARED_CHANNEL);
    EXPECT_EQ(fake::calls("ibv_get_cq_event"), 0);
}

TEST_F(CqTest, ChannelWaitNamesTheCqThatFired) {
    std::unique_ptr<prov::CompletionQueue> other;
    ASSERT_EQ(dom_->create_cq(ch_.get(), true, 8, &other), 0);
    fake::fire(static_cast<CompletionQueue *>(other.get())->raw());
    EXPECT_EQ(ch_->wait(), other.get());
    EXPECT_EQ(fake::acked_cq_events(), 1u);
    size_t before = log_count();
    EXPECT_EQ(ch_->wait(), nullptr);  // nothing fired: not read, not logged
    EXPECT_EQ(log_count(), before);
    EXPECT_EQ(fake::calls("ibv_get_cq_event"), 1);
}

TEST_F(CqTest, ChannelWaitFails) {
    fake::fire(raw());
    fake::fail("ibv_get_cq_event", EBADF);
    EXPECT_EQ(ch_->wait(), nullptr);
    EXPECT_TRUE(logged_error("ibv_get_cq_event", std::strerror(EBADF)));
}

}  // namespace
}  // namespace rpma::test
