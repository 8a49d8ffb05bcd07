// Connections through the C API with RPMA_PROVIDER=verbs over the fakes: rdma_cm's events
// becoming rpma_conn_next_event's, and rdma_connect, rdma_disconnect and a server-side QP
// failing, each leaving nothing behind.
#include <poll.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "verbs_test.h"

namespace rpma::test {
namespace {

class CApiConnTest : public VerbsTest {
  protected:
    void SetUp() override {
        VerbsTest::SetUp();
        ::setenv("RPMA_PROVIDER", "verbs", 1);
        fake::set_stack_present(true);
        ibv_context *ctx = nullptr;
        ASSERT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx), 0);
        ASSERT_EQ(rpma_peer_new(ctx, &peer_), 0);
    }
    void TearDown() override {
        if (conn_) {
            EXPECT_EQ(rpma_conn_delete(&conn_), 0);
        }
        if (req_) {
            EXPECT_EQ(rpma_conn_req_delete(&req_), 0);
        }
        if (ep_) {
            EXPECT_EQ(rpma_ep_shutdown(&ep_), 0);
        }
        EXPECT_EQ(rpma_peer_delete(&peer_), 0);
        ::unsetenv("RPMA_PROVIDER");
        VerbsTest::TearDown();
    }
    // A client's request; its id and the event channel of its own the id moved to.
    void client_request() {
        ASSERT_EQ(rpma_conn_req_new(peer_, "192.0.2.1", "7204", nullptr, &req_), 0);
        id_ = fake::last_cm_id();
        evch_ = fake::last_event_channel();
        ASSERT_NE(id_, nullptr);
        ASSERT_EQ(id_->channel, evch_);
    }
    rpma_conn_event next_event() {
        rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        EXPECT_EQ(rpma_conn_next_event(conn_, &ev), 0);
        return ev;
    }

    rpma_peer *peer_ = nullptr;
    rpma_conn_req *req_ = nullptr;
    rpma_conn *conn_ = nullptr;
    rpma_ep *ep_ = nullptr;
    rdma_cm_id *id_ = nullptr;
    rdma_event_channel *evch_ = nullptr;
};

TEST_F(CApiConnTest, ClientEstablishesAndCloses) {
    client_request();
    rpma_conn_private_data pdata{const_cast<char *>("hello"), 5};
    ASSERT_EQ(rpma_conn_req_connect(&req_, &pdata, &conn_), 0);
    EXPECT_EQ(req_, nullptr);
    EXPECT_EQ(fake::calls("rdma_connect"), 1);
    fake::deliver(evch_, id_, RDMA_CM_EVENT_ESTABLISHED, {'o', 'k'});
    EXPECT_EQ(next_event(), RPMA_CONN_ESTABLISHED);
    rpma_conn_private_data got{};
    ASSERT_EQ(rpma_conn_get_private_data(conn_, &got), 0);
    ASSERT_GE(got.len, 2);
    EXPECT_EQ(std::memcmp(got.ptr, "ok", 2), 0);
    ASSERT_EQ(rpma_conn_disconnect(conn_), 0);
    fake::deliver(evch_, id_, RDMA_CM_EVENT_DISCONNECTED);
    EXPECT_EQ(next_event(), RPMA_CONN_CLOSED);
}

// The event fd is rdma_cm's channel, as upstream's: readable while an event waits, blocking or
// not as the application sets it.
TEST_F(CApiConnTest, TheEventFdIsTheConnectionsChannel) {
    client_request();
    ASSERT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn_), 0);
    int fd = -1;
    ASSERT_EQ(rpma_conn_get_event_fd(conn_, &fd), 0);
    EXPECT_EQ(fd, evch_->fd);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(rpma_conn_next_event(conn_, &ev), RPMA_E_NO_EVENT);  // the fakes never block
    fake::deliver(evch_, id_, RDMA_CM_EVENT_ESTABLISHED);
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 1);
    EXPECT_EQ(next_event(), RPMA_CONN_ESTABLISHED);
    EXPECT_EQ(::poll(&p, 1, 0), 0);
}

// A connection holds the descriptors upstream's holds: its rdma_cm event channel and its
// completion channel, and no event queue of the core's beside them.
TEST_F(CApiConnTest, AConnectionHoldsTwoDescriptors) {
    size_t before = proc_self_entries("fd");
    client_request();
    EXPECT_EQ(proc_self_entries("fd"), before + 2);
    ASSERT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn_), 0);
    EXPECT_EQ(proc_self_entries("fd"), before + 2);
    ASSERT_EQ(rpma_conn_delete(&conn_), 0);
    EXPECT_EQ(proc_self_entries("fd"), before);
}

TEST_F(CApiConnTest, AFailedReadIsAProviderError) {
    client_request();
    ASSERT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn_), 0);
    fake::deliver(evch_, id_, RDMA_CM_EVENT_ESTABLISHED);
    fake::fail("rdma_get_cm_event", EIO);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(rpma_conn_next_event(conn_, &ev), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("rdma_get_cm_event", std::strerror(EIO)));
    EXPECT_EQ(next_event(), RPMA_CONN_ESTABLISHED);
}

TEST_F(CApiConnTest, ClientRejected) {
    client_request();
    ASSERT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn_), 0);
    fake::deliver(evch_, id_, RDMA_CM_EVENT_REJECTED);
    EXPECT_EQ(next_event(), RPMA_CONN_REJECTED);
}

TEST_F(CApiConnTest, ConnectFails) {
    client_request();
    fake::fail("rdma_connect", ECONNREFUSED);
    EXPECT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn_), RPMA_E_PROVIDER);
    EXPECT_EQ(req_, nullptr);
    EXPECT_EQ(conn_, nullptr);
    EXPECT_TRUE(logged_error("rdma_connect", std::strerror(ECONNREFUSED)));
}

TEST_F(CApiConnTest, DisconnectFails) {
    client_request();
    ASSERT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn_), 0);
    fake::deliver(evch_, id_, RDMA_CM_EVENT_ESTABLISHED);
    EXPECT_EQ(next_event(), RPMA_CONN_ESTABLISHED);
    fake::fail("rdma_disconnect", EINVAL);
    EXPECT_EQ(rpma_conn_disconnect(conn_), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("rdma_disconnect", std::strerror(EINVAL)));
}

TEST_F(CApiConnTest, ServerRequestDeletedIsRejected) {
    ASSERT_EQ(rpma_ep_listen(peer_, "192.0.2.1", "7204", &ep_), 0);
    fake::deliver(fake::last_event_channel(), fake::incoming_id(), RDMA_CM_EVENT_CONNECT_REQUEST,
                  {'c'});
    ASSERT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req_), 0);
    rpma_conn_private_data got{};
    ASSERT_EQ(rpma_conn_req_get_private_data(req_, &got), 0);
    ASSERT_GE(got.len, 1);
    EXPECT_EQ(static_cast<char *>(got.ptr)[0], 'c');
    EXPECT_EQ(rpma_conn_req_delete(&req_), 0);
    EXPECT_EQ(fake::calls("rdma_reject"), 1);
}

TEST_F(CApiConnTest, ServerQpCreationFailsAndTheRequestIsRejected) {
    ASSERT_EQ(rpma_ep_listen(peer_, "192.0.2.1", "7204", &ep_), 0);
    fake::deliver(fake::last_event_channel(), fake::incoming_id(), RDMA_CM_EVENT_CONNECT_REQUEST);
    fake::fail("rdma_create_qp_ex", ENOMEM);
    EXPECT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req_), RPMA_E_PROVIDER);
    EXPECT_EQ(req_, nullptr);
    EXPECT_EQ(fake::calls("rdma_reject"), 1);
    EXPECT_TRUE(logged_error("rdma_create_qp_ex", std::strerror(ENOMEM)));
}

TEST_F(CApiConnTest, ServerAccepts) {
    ASSERT_EQ(rpma_ep_listen(peer_, "192.0.2.1", "7204", &ep_), 0);
    rdma_cm_id *id = fake::incoming_id();
    fake::deliver(fake::last_event_channel(), id, RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req_), 0);
    ASSERT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn_), 0);
    EXPECT_EQ(fake::calls("rdma_accept"), 1);
    fake::deliver(id->channel, id, RDMA_CM_EVENT_ESTABLISHED);
    EXPECT_EQ(next_event(), RPMA_CONN_ESTABLISHED);
    EXPECT_EQ(fake::calls("rdma_reject"), 0);
}

}  // namespace
}  // namespace rpma::test
