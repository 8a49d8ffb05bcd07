// rdma_cm events to rpma_conn_events: the queue pair's mapping of each event type, and the
// domain's CmEventPump routing events by id on its thread (and failing to start or adopt).
#include <cerrno>
#include <cstring>

#include "qp_fixture.h"

namespace rpma::test {
namespace {

using verbs::CmEventPump;

rdma_cm_event event(rdma_cm_event_type type, const std::vector<uint8_t> &pdata = {}) {
    rdma_cm_event ev{};
    ev.event = type;
    if (!pdata.empty()) {
        ev.param.conn.private_data = pdata.data();
        ev.param.conn.private_data_len = static_cast<uint8_t>(pdata.size());
    }
    return ev;
}

class CmEventTest : public QpTest {
  protected:
    // Every event queued so far.
    std::vector<rpma_conn_event> drain() {
        std::vector<rpma_conn_event> out;
        while (auto e = events_.try_pop()) out.push_back(*e);
        return out;
    }
};

TEST_F(CmEventTest, EstablishedCarriesTheServersPrivateData) {
    ASSERT_EQ(create_active(), 0);
    const std::vector<uint8_t> pdata{4, 5, 6};
    qp().on_cm_event(event(RDMA_CM_EVENT_ESTABLISHED, pdata));
    EXPECT_EQ(drain(), std::vector<rpma_conn_event>{RPMA_CONN_ESTABLISHED});
    EXPECT_EQ(qp_->remote_pdata(), pdata);
}

TEST_F(CmEventTest, ServerKeepsTheClientsPrivateData) {
    verbs::ConnectRequest req(fake::incoming_id(), "ab", 2);
    ASSERT_EQ(dom_->create_qp(attr_, req, &qp_), 0);
    qp().on_cm_event(event(RDMA_CM_EVENT_ESTABLISHED, {9, 9, 9}));
    EXPECT_EQ(drain(), std::vector<rpma_conn_event>{RPMA_CONN_ESTABLISHED});
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
    qp().on_cm_event(event(GetParam().type));
    EXPECT_EQ(drain(), std::vector<rpma_conn_event>{GetParam().expected});
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
    qp().on_cm_event(event(RDMA_CM_EVENT_DISCONNECTED));
    qp().on_cm_event(event(RDMA_CM_EVENT_TIMEWAIT_EXIT));
    qp().on_cm_event(event(RDMA_CM_EVENT_DISCONNECTED));
    EXPECT_EQ(drain(), std::vector<rpma_conn_event>{RPMA_CONN_CLOSED});
}

TEST_F(CmEventTest, OtherEventsAreIgnored) {
    ASSERT_EQ(create_active(), 0);
    qp().on_cm_event(event(RDMA_CM_EVENT_ADDR_CHANGE));
    EXPECT_TRUE(drain().empty());
    EXPECT_TRUE(logged(RPMA_LOG_LEVEL_NOTICE, {"RDMA_CM_EVENT_ADDR_CHANGE"}));
}

TEST_F(CmEventTest, EndsAreToldWithRdmaCmsWords) {
    ASSERT_EQ(create_active(), 0);
    rdma_cm_event ev = event(RDMA_CM_EVENT_UNREACHABLE);
    ev.status = -ETIMEDOUT;
    qp().on_cm_event(ev);
    EXPECT_EQ(drain(), std::vector<rpma_conn_event>{RPMA_CONN_UNREACHABLE});
    EXPECT_TRUE(
        logged(RPMA_LOG_LEVEL_NOTICE, {"RDMA_CM_EVENT_UNREACHABLE", std::strerror(ETIMEDOUT)}));
}

TEST_F(CmEventTest, PumpRoutesByIdAndAcknowledgesEverything) {
    ASSERT_EQ(create_active(), 0);
    rdma_cm_id *id = fake::last_cm_id();  // the queue pair's
    rdma_event_channel *ch = dom_->pump()->channel();
    ASSERT_EQ(id->channel, ch);  // migrated onto the pump's channel
    rdma_cm_id *stranger = fake::incoming_id();
    fake::deliver(ch, stranger, RDMA_CM_EVENT_ESTABLISHED);  // nobody's: acknowledged, dropped
    fake::deliver(ch, id, RDMA_CM_EVENT_ESTABLISHED, {1, 2});
    auto first = events_.pop();  // blocks until the pump's thread got there
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(*first, RPMA_CONN_ESTABLISHED);
    EXPECT_EQ(qp_->remote_pdata(), (std::vector<uint8_t>{1, 2}));
    EXPECT_GE(fake::calls("rdma_ack_cm_event"), 1);  // the stranger's, before ours
    EXPECT_TRUE(drain().empty());
    qp_.reset();
    dom_.reset();  // joins the pump's thread; what it did not take dies with its channel
    rdma_destroy_id(stranger);
}

// Reads that fail leave the channel readable: the pump waits before each new try instead of
// spinning, says so once for the run of failures, and the event arrives once a read works. Five
// reads in all: three failures, the event, the empty channel.
TEST_F(CmEventTest, PumpWaitsOutFailedReadsAndGoesOn) {
    ASSERT_EQ(create_active(), 0);
    rdma_cm_id *id = fake::last_cm_id();
    rdma_event_channel *ch = dom_->pump()->channel();
    for (int nth = 1; nth <= 3; nth++) fake::fail("rdma_get_cm_event", EIO, nth);
    fake::deliver(ch, id, RDMA_CM_EVENT_ESTABLISHED);
    auto first = events_.pop();
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(*first, RPMA_CONN_ESTABLISHED);
    qp_.reset();
    dom_.reset();  // joins the pump's thread: its counts are final
    EXPECT_EQ(fake::calls("rdma_get_cm_event"), 5);
    EXPECT_EQ(logged_times(RPMA_LOG_LEVEL_ERROR, {"rdma_get_cm_event", std::strerror(EIO)}), 1u)
        << logs();
    EXPECT_TRUE(logged(RPMA_LOG_LEVEL_NOTICE, {"connection events are read again"}));
}

TEST_F(CmEventTest, PumpLogsAFailedAcknowledgement) {
    ASSERT_EQ(create_active(), 0);
    rdma_cm_id *id = fake::last_cm_id();
    fake::fail("rdma_ack_cm_event", EINVAL);
    fake::deliver(dom_->pump()->channel(), id, RDMA_CM_EVENT_ESTABLISHED);
    auto first = events_.pop();
    ASSERT_TRUE(first.has_value());
    qp_.reset();
    dom_.reset();
    EXPECT_TRUE(logged_error("rdma_ack_cm_event", std::strerror(EINVAL)));
}

TEST_F(CmEventTest, PumpCannotStart) {
    fake::fail("rdma_create_event_channel", EMFILE);
    std::unique_ptr<CmEventPump> p;
    EXPECT_EQ(CmEventPump::create(&p), RPMA_E_PROVIDER);
    EXPECT_EQ(p, nullptr);
    EXPECT_TRUE(logged_error("rdma_create_event_channel", std::strerror(EMFILE)));
}

struct Sink : verbs::CmEventSink {
    FdQueue<rdma_cm_event_type> got;
    void on_cm_event(const rdma_cm_event &ev) override { got.push(ev.event); }
};

TEST_F(CmEventTest, PumpCannotAdopt) {
    std::unique_ptr<CmEventPump> p;
    ASSERT_EQ(CmEventPump::create(&p), 0);
    rdma_cm_id *id = fake::incoming_id();
    rdma_cm_id *other = fake::incoming_id();
    Sink refused, adopted;
    fake::fail("rdma_migrate_id", EINVAL);
    EXPECT_EQ(p->adopt(id, &refused), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("rdma_migrate_id", std::strerror(EINVAL)));
    ASSERT_EQ(p->adopt(other, &adopted), 0);
    fake::deliver(p->channel(), id, RDMA_CM_EVENT_REJECTED);
    fake::deliver(p->channel(), other, RDMA_CM_EVENT_ESTABLISHED);
    EXPECT_EQ(adopted.got.pop(), RDMA_CM_EVENT_ESTABLISHED);  // after the first was handled
    EXPECT_FALSE(refused.got.try_pop().has_value());
    p.reset();
    rdma_destroy_id(id);
    rdma_destroy_id(other);
}

}  // namespace
}  // namespace rpma::test
