// verbs::Listener and ConnectRequest: each rdma_cm step of listening failing (everything made
// before it freed), taking requests (errors, other events skipped, private data) and closing
// with requests still queued (each rejected and freed), and an unanswered request's rejection.
#include <cerrno>
#include <cstring>

#include "common/fd.h"
#include "provider/verbs/connect_request.h"
#include "provider/verbs/listener.h"
#include "verbs_test.h"

namespace rpma::test {
namespace {

using verbs::Listener;

class ListenerTest : public VerbsTest {
  protected:
    void listen() {
        ASSERT_EQ(Listener::create("192.0.2.1", "7204", &ep_), 0);
        ch_ = fake::last_event_channel();
        ASSERT_NE(ch_, nullptr);
    }
    void TearDown() override {
        ep_.reset();
        VerbsTest::TearDown();
    }
    std::shared_ptr<prov::Listener> ep_;
    rdma_event_channel *ch_ = nullptr;
};

struct StepCase {
    const char *fn;
    int err;
};

void PrintTo(const StepCase &c, std::ostream *os) {
    *os << c.fn;
}

class ListenerStepTest : public ListenerTest, public ::testing::WithParamInterface<StepCase> {};

TEST_P(ListenerStepTest, FailsFreeingWhatCameBefore) {
    fake::fail(GetParam().fn, GetParam().err);
    EXPECT_EQ(Listener::create("192.0.2.1", "7204", &ep_), RPMA_E_PROVIDER);
    EXPECT_EQ(ep_, nullptr);
    EXPECT_TRUE(logged_error("192.0.2.1:7204", std::strerror(GetParam().err))) << logs();
    if (std::strcmp(GetParam().fn, "rdma_getaddrinfo") != 0) {
        EXPECT_TRUE(logged_error(GetParam().fn));
    }
    // TearDown: no addrinfo, channel or id left
}

INSTANTIATE_TEST_SUITE_P(Steps, ListenerStepTest,
                         ::testing::Values(StepCase{"rdma_getaddrinfo", EADDRNOTAVAIL},
                                           StepCase{"rdma_create_event_channel", EMFILE},
                                           StepCase{"rdma_create_id", ENOMEM},
                                           StepCase{"rdma_bind_addr", EADDRINUSE},
                                           StepCase{"rdma_listen", EINVAL}));

TEST_F(ListenerTest, ListensAndCloses) {
    listen();
    EXPECT_EQ(ep_->fd(), ch_->fd);
    EXPECT_EQ(fake::calls("rdma_listen"), 1);
    ep_->close();
    ep_->close();  // once only
    EXPECT_EQ(fake::calls("rdma_destroy_id"), 1);
    EXPECT_EQ(fake::calls("rdma_destroy_event_channel"), 1);
    ep_.reset();
}

TEST_F(ListenerTest, NothingWaiting) {
    listen();
    size_t before = log_count();
    EXPECT_EQ(ep_->next(), nullptr);
    EXPECT_EQ(log_count(), before);  // EAGAIN is no error
}

TEST_F(ListenerTest, GetEventFails) {
    listen();
    fake::deliver(ch_, fake::incoming_id(), RDMA_CM_EVENT_CONNECT_REQUEST);  // read only then
    fake::fail("rdma_get_cm_event", EIO);
    EXPECT_EQ(ep_->next(), nullptr);
    EXPECT_TRUE(logged_error("rdma_get_cm_event", std::strerror(EIO)));
}

// A skipped event woke whoever polled the endpoint's fd: with nothing behind it the call returns
// after that one read, where a second would block on a blocking channel.
TEST_F(ListenerTest, ASkippedEventAloneIsNoRequestAfterOneRead) {
    listen();
    fake::deliver(ch_, fake::last_cm_id(), RDMA_CM_EVENT_DEVICE_REMOVAL);
    int reads = fake::calls("rdma_get_cm_event");
    EXPECT_EQ(ep_->next(), nullptr);
    EXPECT_EQ(fake::calls("rdma_get_cm_event"), reads + 1) << "read on after the skipped event";
    EXPECT_EQ(fake::calls("rdma_ack_cm_event"), 1);
}

// The request is read with cancellation off after a poll on the blocking channel: a read
// cancelled after taking it would leave it unacknowledged (CmEventTest has the why).
TEST_F(ListenerTest, ReadsARequestWithCancellationOff) {
    listen();
    ASSERT_TRUE(set_nonblocking(ch_->fd, false));
    fake::deliver(ch_, fake::incoming_id(), RDMA_CM_EVENT_CONNECT_REQUEST);
    auto req = ep_->next();
    ASSERT_NE(req, nullptr);
    EXPECT_EQ(fake::cancellable_calls("rdma_get_cm_event"), 0);
    EXPECT_EQ(fake::cancellable_calls("rdma_ack_cm_event"), 0);
    EXPECT_EQ(fake::calls("rdma_get_cm_event, non-blocking"), 1);  // CmEventTest has the why
    EXPECT_FALSE(nonblocking(ch_->fd));
}

TEST_F(ListenerTest, TakesARequestWithItsPrivateDataSkippingOtherEvents) {
    listen();
    fake::deliver(ch_, fake::last_cm_id(), RDMA_CM_EVENT_DEVICE_REMOVAL);
    rdma_cm_id *id = fake::incoming_id();
    fake::deliver(ch_, id, RDMA_CM_EVENT_CONNECT_REQUEST, {1, 2, 3});
    auto req = ep_->next();
    ASSERT_NE(req, nullptr);
    EXPECT_EQ(static_cast<verbs::ConnectRequest &>(*req).id(), id);
    EXPECT_EQ(req->private_data(), (std::vector<uint8_t>{1, 2, 3}));
    EXPECT_TRUE(logged(RPMA_LOG_LEVEL_WARNING, {"unexpected", "DEVICE_REMOVAL"})) << logs();
    EXPECT_EQ(fake::calls("rdma_ack_cm_event"), 2);
    req.reset();  // unanswered: rejected and freed
    EXPECT_EQ(fake::calls("rdma_reject"), 1);
    EXPECT_EQ(fake::calls("rdma_destroy_id"), 1);
}

TEST_F(ListenerTest, RequestRejectAndDestroyFailuresAreLogged) {
    listen();
    fake::deliver(ch_, fake::incoming_id(), RDMA_CM_EVENT_CONNECT_REQUEST);
    auto req = ep_->next();
    ASSERT_NE(req, nullptr);
    EXPECT_TRUE(req->private_data().empty());
    fake::fail("rdma_reject", ECONNRESET);
    fake::fail("rdma_destroy_id", EINVAL);
    req.reset();
    EXPECT_TRUE(logged(RPMA_LOG_LEVEL_WARNING, {"rdma_reject", std::strerror(ECONNRESET)}));
    EXPECT_TRUE(logged_error("rdma_destroy_id", std::strerror(EINVAL)));
}

TEST_F(ListenerTest, CloseRejectsWhatIsStillQueued) {
    listen();
    fake::deliver(ch_, fake::incoming_id(), RDMA_CM_EVENT_CONNECT_REQUEST, {9});
    fake::deliver(ch_, fake::last_cm_id(), RDMA_CM_EVENT_ADDR_CHANGE);
    fake::deliver(ch_, fake::incoming_id(), RDMA_CM_EVENT_CONNECT_REQUEST);
    ep_.reset();
    EXPECT_EQ(fake::calls("rdma_reject"), 2);
    EXPECT_EQ(fake::calls("rdma_ack_cm_event"), 3);
    EXPECT_EQ(fake::calls("rdma_destroy_id"), 3);  // two requests and the listening id
}

TEST_F(ListenerTest, CloseLogsAQueuedRequestsRejectAndDestroyFailures) {
    listen();
    fake::deliver(ch_, fake::incoming_id(), RDMA_CM_EVENT_CONNECT_REQUEST);
    fake::fail("rdma_reject", ECONNRESET);
    fake::fail("rdma_destroy_id", ENODEV);
    ep_->close();
    EXPECT_TRUE(logged(RPMA_LOG_LEVEL_WARNING, {"rdma_reject", std::strerror(ECONNRESET)}));
    EXPECT_TRUE(logged_error("rdma_destroy_id", std::strerror(ENODEV)));
}

TEST_F(ListenerTest, CloseLogsTheListeningIdsDestroyFailure) {
    listen();
    fake::fail("rdma_destroy_id", EBUSY);
    ep_->close();
    EXPECT_TRUE(logged_error("rdma_destroy_id", std::strerror(EBUSY)));
}

}  // namespace
}  // namespace rpma::test
