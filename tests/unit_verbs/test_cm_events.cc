// rdma_cm events to rpma_conn_events: each queue pair's id on an event channel of its own, read
// by next_event on the caller's thread (no thread of the provider's), the mapping of each event
// type, and the failures of the channel's calls.
#include <cerrno>
#include <cstring>

#include "common/fd.h"
#include "qp_fixture.h"

namespace rpma::test {
namespace {

class CmEventTest : public QpTest {
  protected:
    // An event for the queue pair's id (a client's, unless given), on the id's channel.
    void deliver(rdma_cm_event_type type, const std::vector<uint8_t> &pdata = {}, int status = 0,
                 rdma_cm_id *id = fake::last_cm_id()) {
        fake::deliver(id->channel, id, type, pdata, status);
    }
    // Every event next_event hands out now (the fake channel reads as non-blocking).
    std::vector<rpma_conn_event> take() {
        std::vector<rpma_conn_event> out;
        rpma_conn_event ev;
        while (qp_->next_event(&ev) == 0) out.push_back(ev);
        return out;
    }
};

TEST_F(CmEventTest, EachQueuePairReadsAChannelOfItsOwn) {
    ASSERT_EQ(create_active(), 0);
    rdma_cm_id *id = fake::last_cm_id();
    ASSERT_NE(id->channel, nullptr);
    EXPECT_EQ(qp_->event_fd(), id->channel->fd);  // what rpma_conn_get_event_fd hands out
    std::shared_ptr<prov::QueuePair> other;
    ASSERT_EQ(dom_->create_qp("192.0.2.2", "7204", attr_, &other), 0);
    rdma_cm_id *other_id = fake::last_cm_id();
    ASSERT_NE(other_id->channel, id->channel);
    fake::deliver(other_id->channel, other_id, RDMA_CM_EVENT_REJECTED);
    EXPECT_TRUE(take().empty());
    rpma_conn_event ev;
    ASSERT_EQ(other->next_event(&ev), 0);
    EXPECT_EQ(ev, RPMA_CONN_REJECTED);
    EXPECT_EQ(fake::calls("rdma_ack_cm_event"), 1);
    other.reset();
}

// Upstream runs no thread, and an application may rely on that: once a process has two, each
// cancellable system call (rxe's doorbell write among them) takes glibc's slower path.
TEST_F(CmEventTest, TheProviderStartsNoThread) {
    size_t before = proc_self_entries("task");
    ASSERT_EQ(create_active(), 0);
    deliver(RDMA_CM_EVENT_ESTABLISHED);
    EXPECT_EQ(take(), std::vector<rpma_conn_event>{RPMA_CONN_ESTABLISHED});
    EXPECT_EQ(proc_self_entries("task"), before);
}

TEST_F(CmEventTest, AnEmptyChannelIsNoEvent) {
    ASSERT_EQ(create_active(), 0);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(qp_->next_event(&ev), RPMA_E_NO_EVENT);
    EXPECT_EQ(ev, RPMA_CONN_UNDEFINED);
}

TEST_F(CmEventTest, EstablishedCarriesTheServersPrivateData) {
    ASSERT_EQ(create_active(), 0);
    const std::vector<uint8_t> pdata{4, 5, 6};
    deliver(RDMA_CM_EVENT_ESTABLISHED, pdata);
    EXPECT_EQ(take(), std::vector<rpma_conn_event>{RPMA_CONN_ESTABLISHED});
    EXPECT_EQ(qp_->remote_pdata(), pdata);
}

// The second close (rdma_cm's TIMEWAIT_EXIT) is dropped, and it woke whoever polled the fd:
// with nothing behind it the call returns after that one read (a blocking channel would block on
// a second; it did, for ever, until 2026-11-27).
TEST_F(CmEventTest, ADroppedSecondCloseAloneIsNoEventAfterOneRead) {
    ASSERT_EQ(create_active(), 0);
    deliver(RDMA_CM_EVENT_DISCONNECTED);
    EXPECT_EQ(take(), std::vector<rpma_conn_event>{RPMA_CONN_CLOSED});
    deliver(RDMA_CM_EVENT_TIMEWAIT_EXIT);
    int reads = fake::calls("rdma_get_cm_event");
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(qp_->next_event(&ev), RPMA_E_NO_EVENT);
    EXPECT_EQ(fake::calls("rdma_get_cm_event"), reads + 1) << "read on after the dropped event";
    // an event behind a dropped one is still read and returned
    deliver(RDMA_CM_EVENT_ADDR_CHANGE);
    deliver(RDMA_CM_EVENT_DEVICE_REMOVAL);
    EXPECT_EQ(take(), std::vector<rpma_conn_event>{RPMA_CONN_LOST});
}

// A waiter may be cancelled where it sleeps, but not inside the read of an event: an event read
// and then cancelled (glibc 2.36 cancels asynchronously around the call) is never acknowledged,
// and rdma_destroy_id waits for it for ever. On a blocking channel, as rdma_cm makes them, the
// sleep is a poll and the read and the acknowledgement run with cancellation off.
TEST_F(CmEventTest, ReadsAnEventWithCancellationOff) {
    ASSERT_EQ(create_active(), 0);
    int fd = qp_->event_fd();
    ASSERT_TRUE(set_nonblocking(fd, false));  // blocking, as rdma_cm makes it
    deliver(RDMA_CM_EVENT_ESTABLISHED);
    int reads = fake::calls("rdma_get_cm_event");
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    ASSERT_EQ(qp_->next_event(&ev), 0);
    EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
    EXPECT_EQ(fake::calls("rdma_get_cm_event"), reads + 1);
    EXPECT_EQ(fake::cancellable_calls("rdma_get_cm_event"), 0);
    EXPECT_EQ(fake::cancellable_calls("rdma_ack_cm_event"), 0);
    // read non-blocking, as librdmacm may read again inside; the channel's mode is put back
    EXPECT_EQ(fake::calls("rdma_get_cm_event, non-blocking"), 1);
    EXPECT_FALSE(nonblocking(fd));
}

TEST_F(CmEventTest, ServerKeepsTheClientsPrivateData) {
    rdma_cm_id *id = fake::incoming_id();
    auto req = std::make_unique<verbs::ConnectRequest>(id, "ab", 2);
    ASSERT_EQ(dom_->create_qp(attr_, *req, &qp_), 0);
    ASSERT_EQ(qp_->event_fd(), id->channel->fd);  // moved off the listener's
    ASSERT_EQ(qp_->accept(std::move(req), nullptr, 0), 0);
    deliver(RDMA_CM_EVENT_ESTABLISHED, {9, 9, 9}, 0, id);
    EXPECT_EQ(take(), std::vector<rpma_conn_event>{RPMA_CONN_ESTABLISHED});
    EXPECT_EQ(qp_->remote_pdata(), (std::vector<uint8_t>{'a', 'b'}));
}

struct MapCase {
    rdma_cm_event_type type;
    rpma_conn_event expected;
};

void PrintTo(const MapCase &c, std::ostream *os) {
    *os << rdma_event_str(c.type);
}

class CmEventMapTest : public CmEventTest, public ::testing::WithParamInterface<MapCase> {};

TEST_P(CmEventMapTest, Maps) {
    ASSERT_EQ(create_active(), 0);
    deliver(GetParam().type);
    EXPECT_EQ(take(), std::vector<rpma_conn_event>{GetParam().expected});
}

INSTANTIATE_TEST_SUITE_P(
    Types, CmEventMapTest,
    ::testing::Values(MapCase{RDMA_CM_EVENT_REJECTED, RPMA_CONN_REJECTED},
                      MapCase{RDMA_CM_EVENT_UNREACHABLE, RPMA_CONN_UNREACHABLE},
                      MapCase{RDMA_CM_EVENT_ADDR_ERROR, RPMA_CONN_UNREACHABLE},
                      MapCase{RDMA_CM_EVENT_ROUTE_ERROR, RPMA_CONN_UNREACHABLE},
                      MapCase{RDMA_CM_EVENT_CONNECT_ERROR, RPMA_CONN_LOST},
                      MapCase{RDMA_CM_EVENT_DEVICE_REMOVAL, RPMA_CONN_LOST},
                      MapCase{RDMA_CM_EVENT_DISCONNECTED, RPMA_CONN_CLOSED},
                      MapCase{RDMA_CM_EVENT_TIMEWAIT_EXIT, RPMA_CONN_CLOSED}));

TEST_F(CmEventTest, DisconnectedThenTimewaitExitIsOneClosed) {
    ASSERT_EQ(create_active(), 0);
    deliver(RDMA_CM_EVENT_DISCONNECTED);
    deliver(RDMA_CM_EVENT_TIMEWAIT_EXIT);
    deliver(RDMA_CM_EVENT_DISCONNECTED);
    EXPECT_EQ(take(), std::vector<rpma_conn_event>{RPMA_CONN_CLOSED});
    EXPECT_EQ(fake::calls("rdma_ack_cm_event"), 3);
}

// An event the application is not told is read, acknowledged and passed over: the call goes on
// to the next one.
TEST_F(CmEventTest, OtherEventsArePassedOver) {
    ASSERT_EQ(create_active(), 0);
    deliver(RDMA_CM_EVENT_ADDR_CHANGE);
    EXPECT_TRUE(take().empty());
    EXPECT_TRUE(logged(RPMA_LOG_LEVEL_NOTICE, {"RDMA_CM_EVENT_ADDR_CHANGE"}));
    deliver(RDMA_CM_EVENT_ADDR_CHANGE);
    deliver(RDMA_CM_EVENT_REJECTED);
    rpma_conn_event ev;
    ASSERT_EQ(qp_->next_event(&ev), 0);
    EXPECT_EQ(ev, RPMA_CONN_REJECTED);
    EXPECT_EQ(fake::calls("rdma_ack_cm_event"), 3);
}

TEST_F(CmEventTest, EndsAreToldWithRdmaCmsWords) {
    ASSERT_EQ(create_active(), 0);
    deliver(RDMA_CM_EVENT_UNREACHABLE, {}, -ETIMEDOUT);
    EXPECT_EQ(take(), std::vector<rpma_conn_event>{RPMA_CONN_UNREACHABLE});
    EXPECT_TRUE(
        logged(RPMA_LOG_LEVEL_NOTICE, {"RDMA_CM_EVENT_UNREACHABLE", std::strerror(ETIMEDOUT)}));
}

// A failed read is the call's error, logged with errno; the event is still there for the next.
TEST_F(CmEventTest, AFailedReadIsAProviderError) {
    ASSERT_EQ(create_active(), 0);
    deliver(RDMA_CM_EVENT_ESTABLISHED);
    fake::fail("rdma_get_cm_event", EIO);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(qp_->next_event(&ev), RPMA_E_PROVIDER);
    EXPECT_EQ(ev, RPMA_CONN_UNDEFINED);
    EXPECT_TRUE(logged_error("rdma_get_cm_event", std::strerror(EIO)));
    EXPECT_EQ(take(), std::vector<rpma_conn_event>{RPMA_CONN_ESTABLISHED});
}

// A signal that interrupts a blocking read is not the application's error.
TEST_F(CmEventTest, AnInterruptedReadReadsAgain) {
    ASSERT_EQ(create_active(), 0);
    deliver(RDMA_CM_EVENT_ESTABLISHED);
    fake::fail("rdma_get_cm_event", EINTR);
    rpma_conn_event ev;
    ASSERT_EQ(qp_->next_event(&ev), 0);
    EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
    EXPECT_EQ(fake::calls("rdma_get_cm_event"), 2);
}

TEST_F(CmEventTest, AFailedAcknowledgementIsLoggedAndTheEventGiven) {
    ASSERT_EQ(create_active(), 0);
    deliver(RDMA_CM_EVENT_ESTABLISHED);
    fake::fail("rdma_ack_cm_event", EINVAL);
    EXPECT_EQ(take(), std::vector<rpma_conn_event>{RPMA_CONN_ESTABLISHED});
    EXPECT_TRUE(logged_error("rdma_ack_cm_event", std::strerror(EINVAL)));
}

// Events never read go with the channel when the queue pair closes (TearDown counts them).
TEST_F(CmEventTest, UnreadEventsGoWithTheQueuePair) {
    ASSERT_EQ(create_active(), 0);
    deliver(RDMA_CM_EVENT_ESTABLISHED);
    deliver(RDMA_CM_EVENT_DISCONNECTED);
    qp_.reset();
    EXPECT_EQ(fake::calls("rdma_destroy_event_channel"), 1);
}

TEST_F(CmEventTest, NoChannelNoQueuePair) {
    fake::fail("rdma_create_event_channel", EMFILE);
    EXPECT_EQ(create_active(), RPMA_E_PROVIDER);
    EXPECT_EQ(qp_, nullptr);
    EXPECT_TRUE(logged_error("rdma_create_event_channel", std::strerror(EMFILE)));
}

TEST_F(CmEventTest, AnIdThatCannotMoveNoQueuePair) {
    fake::fail("rdma_migrate_id", EINVAL);
    EXPECT_EQ(create_active(), RPMA_E_PROVIDER);
    EXPECT_EQ(qp_, nullptr);
    EXPECT_TRUE(logged_error("rdma_migrate_id", std::strerror(EINVAL)));
}

TEST_F(CmEventTest, AServerIdThatCannotMoveIsRejected) {
    verbs::ConnectRequest req(fake::incoming_id(), "ab", 2);
    fake::fail("rdma_migrate_id", EINVAL);
    EXPECT_EQ(dom_->create_qp(attr_, req, &qp_), RPMA_E_PROVIDER);
    EXPECT_EQ(qp_, nullptr);
    EXPECT_EQ(fake::calls("rdma_reject"), 1);
}

}  // namespace
}  // namespace rpma::test
