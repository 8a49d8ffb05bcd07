// verbs::QueuePair: each step of making one failing (client and server side, everything made
// before the failure destroyed), and connect, accept, disconnect and posting failing.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "qp_fixture.h"

namespace rpma::test {
namespace {

TEST_F(QpTest, ActiveCreatesAndCloses) {
    ASSERT_EQ(create_active(), 0);
    EXPECT_EQ(qp_->qp_num(), 0x42u);
    const ibv_qp_init_attr_ex &a = fake::seen().qp_attr;
    EXPECT_EQ(a.qp_type, IBV_QPT_RC);
    EXPECT_EQ(a.cap.max_send_wr, 4u);
    EXPECT_EQ(a.cap.max_recv_wr, 4u);
    EXPECT_EQ(a.pd, dom_->pd());
    EXPECT_EQ(a.srq, nullptr);
    qp_->close();
    qp_->close();  // once only
    EXPECT_EQ(fake::calls("rdma_destroy_qp"), 1);
    EXPECT_EQ(fake::calls("rdma_destroy_id"), 1);
    EXPECT_EQ(fake::calls("rdma_reject"), 0);
}

struct StepCase {
    const char *fn;
    int err;
    const char *logged;  // what the error message names
};

void PrintTo(const StepCase &c, std::ostream *os) {
    *os << c.fn;
}

class QpStepTest : public QpTest, public ::testing::WithParamInterface<StepCase> {};

TEST_P(QpStepTest, ActiveFailsFreeingWhatCameBefore) {
    fake::fail(GetParam().fn, GetParam().err);
    EXPECT_EQ(create_active(), RPMA_E_PROVIDER);
    EXPECT_EQ(qp_, nullptr);
    EXPECT_TRUE(logged_error(GetParam().logged, std::strerror(GetParam().err))) << logs();
    // TearDown: the addrinfo, id, QP, flush region and event channel are gone
}

INSTANTIATE_TEST_SUITE_P(
    Steps, QpStepTest,
    ::testing::Values(StepCase{"rdma_getaddrinfo", ENODEV, "cannot resolve 192.0.2.1:7204"},
                      StepCase{"rdma_create_id", ENOMEM, "rdma_create_id"},
                      StepCase{"rdma_resolve_addr", EHOSTUNREACH, "rdma_resolve_addr"},
                      StepCase{"rdma_resolve_route", ETIMEDOUT, "rdma_resolve_route"},
                      StepCase{"rdma_create_qp_ex", ENOMEM, "rdma_create_qp_ex(send 4, receive 4)"},
                      StepCase{"ibv_reg_mr", EFAULT, "ibv_reg_mr(the flush's read target)"},
                      StepCase{"rdma_create_event_channel", EMFILE, "rdma_create_event_channel"},
                      StepCase{"rdma_migrate_id", EINVAL, "rdma_migrate_id"}));

class PassiveQpTest : public QpTest {
  protected:
    void SetUp() override {
        QpTest::SetUp();
        req_ = std::make_unique<verbs::ConnectRequest>(fake::incoming_id(), "hi", 2);
    }
    void TearDown() override {
        qp_.reset();
        req_.reset();
        QpTest::TearDown();
    }
    std::unique_ptr<verbs::ConnectRequest> req_;
};

TEST_F(PassiveQpTest, CreationFailureRejectsTheRequestOnce) {
    fake::fail("rdma_create_qp_ex", ENOMEM);
    EXPECT_EQ(dom_->create_qp(attr_, *req_, &qp_), RPMA_E_PROVIDER);
    EXPECT_EQ(qp_, nullptr);
    req_.reset();
    EXPECT_EQ(fake::calls("rdma_reject"), 1);
    EXPECT_EQ(fake::calls("rdma_destroy_id"), 1);
}

// Accepted, the queue pair keeps the request's bytes where the application was shown them
// (rpma_conn_req_get_private_data): they were freed with the request before.
TEST_F(PassiveQpTest, CarriesTheClientsPrivateDataWhereTheRequestShowedIt) {
    ASSERT_EQ(dom_->create_qp(attr_, *req_, &qp_), 0);
    const uint8_t *shown = req_->private_data().data();
    ASSERT_EQ(qp_->accept(std::move(req_), nullptr, 0), 0);
    EXPECT_EQ(qp_->remote_pdata(), (std::vector<uint8_t>{'h', 'i'}));
    EXPECT_EQ(qp_->remote_pdata().data(), shown);
}

TEST_F(PassiveQpTest, AcceptFailsAndCloseStillRejects) {
    ASSERT_EQ(dom_->create_qp(attr_, *req_, &qp_), 0);
    fake::fail("rdma_accept", ECONNABORTED);
    EXPECT_EQ(qp_->accept(std::move(req_), nullptr, 0), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("rdma_accept", std::strerror(ECONNABORTED)));
    qp_->close();
    EXPECT_EQ(fake::calls("rdma_reject"), 1);
}

TEST_F(PassiveQpTest, RejectFailureAtCloseIsLogged) {
    ASSERT_EQ(dom_->create_qp(attr_, *req_, &qp_), 0);
    fake::fail("rdma_reject", ECONNRESET);
    qp_->close();
    EXPECT_TRUE(logged(RPMA_LOG_LEVEL_WARNING, {"rdma_reject", std::strerror(ECONNRESET)}));
}

TEST_F(PassiveQpTest, AcceptedIsNotRejected) {
    ASSERT_EQ(dom_->create_qp(attr_, *req_, &qp_), 0);
    ASSERT_EQ(qp_->accept(std::move(req_), "x", 1), 0);
    qp_->close();
    EXPECT_EQ(fake::calls("rdma_reject"), 0);
}

TEST_F(QpTest, ConnectFails) {
    ASSERT_EQ(create_active(), 0);
    fake::fail("rdma_connect", ECONNREFUSED);
    EXPECT_EQ(qp_->connect("p", 1), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("rdma_connect", std::strerror(ECONNREFUSED)));
}

TEST_F(QpTest, DisconnectFails) {
    ASSERT_EQ(create_active(), 0);
    fake::fail("rdma_disconnect", EINVAL);
    EXPECT_EQ(qp_->disconnect(), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("rdma_disconnect", std::strerror(EINVAL)));
}

TEST_F(QpTest, DestroyIdFailureAtCloseIsLogged) {
    ASSERT_EQ(create_active(), 0);
    fake::fail("rdma_destroy_id", EBUSY);
    qp_->close();
    EXPECT_TRUE(logged_error("rdma_destroy_id", std::strerror(EBUSY)));
}

TEST_F(QpTest, PostSendFails) {
    ASSERT_EQ(create_active(), 0);
    prov::SendWr wr;
    wr.op = prov::WrOp::kWrite;
    fake::fail("ibv_post_send", ENOMEM);
    EXPECT_EQ(qp_->post_send(prov::SendWr(wr)), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("ibv_post_send(write, 0 bytes)", "(the send queue is full)"));
    fake::fail("ibv_post_send", EINVAL);
    wr.op = prov::WrOp::kSend;
    EXPECT_EQ(qp_->post_send(prov::SendWr(wr)), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("ibv_post_send(send, 0 bytes)", std::strerror(EINVAL)));
}

TEST_F(QpTest, PostRecvFails) {
    ASSERT_EQ(create_active(), 0);
    fake::fail("ibv_post_recv", ENOMEM);
    EXPECT_EQ(qp_->post_recv(prov::RecvWr{}), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("ibv_post_recv", "(the receive queue is full)"));
}

// Fills the stack the next call will use with a pattern, so that a field a post forgets to set
// shows as that pattern rather than as a zero an earlier call left there.
[[gnu::noinline]] void dirty_stack() {
    volatile unsigned char junk[4096];
    for (auto &b : junk) b = 0xa5;
}

// A post sets the fields a device reads of an RC request, for every operation the core posts,
// instead of zeroing the whole work request (the memory-window and TSO unions stay unset, as
// upstream leaves them).
TEST_F(QpTest, APostSetsEveryFieldADeviceReads) {
    ASSERT_EQ(create_active(), 0);
    std::vector<char> buf(64);
    std::shared_ptr<prov::MemoryRegion> mr;
    ASSERT_EQ(dom_->register_memory(buf.data(), buf.size(),
                                    RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_READ_DST, &mr),
              0);
    struct Case {
        prov::WrOp op;
        ibv_wr_opcode opcode;
        bool remote;
        bool imm;
    };
    const Case cases[] = {{prov::WrOp::kWrite, IBV_WR_RDMA_WRITE, true, false},
                          {prov::WrOp::kWriteImm, IBV_WR_RDMA_WRITE_WITH_IMM, true, true},
                          {prov::WrOp::kRead, IBV_WR_RDMA_READ, true, false},
                          {prov::WrOp::kSend, IBV_WR_SEND, false, false},
                          {prov::WrOp::kSendImm, IBV_WR_SEND_WITH_IMM, false, true}};
    for (const Case &c : cases) {
        for (bool with_src : {true, false}) {
            for (bool sig : {true, false}) {
                SCOPED_TRACE(testing::Message() << "opcode " << c.opcode << " with_src " << with_src
                                                << " signaled " << sig);
                prov::SendWr wr;
                wr.op = c.op;
                wr.wr_id = 0x1234;
                wr.signaled = sig;
                wr.raddr = 0x9000;
                wr.rkey = 55;
                wr.imm = 0x01020304;
                if (with_src) {
                    wr.local = buf.data() + 8;
                    wr.len = 16;
                    wr.local_region = &mr;
                }
                dirty_stack();
                ASSERT_EQ(qp_->post_send(std::move(wr)), 0);
                const ibv_send_wr &w = fake::seen().send_wr;
                EXPECT_EQ(w.wr_id, 0x1234u);
                EXPECT_EQ(w.next, nullptr);
                EXPECT_EQ(w.opcode, c.opcode);
                EXPECT_EQ(w.send_flags, sig ? static_cast<unsigned>(IBV_SEND_SIGNALED) : 0u);
                EXPECT_EQ(w.num_sge, with_src ? 1 : 0);
                if (with_src) {
                    const ibv_sge &sge = fake::seen().send_sge;
                    EXPECT_EQ(sge.addr, reinterpret_cast<uintptr_t>(buf.data() + 8));
                    EXPECT_EQ(sge.length, 16u);
                    EXPECT_EQ(sge.lkey, mr->lkey());
                } else {
                    EXPECT_EQ(w.sg_list, nullptr);
                }
                if (c.remote) {
                    EXPECT_EQ(w.wr.rdma.remote_addr, 0x9000u);
                    EXPECT_EQ(w.wr.rdma.rkey, 55u);
                }
                if (c.imm) {
                    EXPECT_EQ(w.imm_data, htonl(0x01020304));
                }
            }
        }
    }
}

TEST_F(QpTest, FlushReadsIntoItsOwnRegion) {
    ASSERT_EQ(create_active(), 0);
    prov::SendWr wr;
    wr.op = prov::WrOp::kFlush;
    wr.raddr = 0x1000;
    wr.rkey = 77;
    ASSERT_EQ(qp_->post_send(prov::SendWr(wr)), 0);
    EXPECT_EQ(fake::seen().send_wr.opcode, IBV_WR_RDMA_READ);
    EXPECT_EQ(fake::seen().send_sge.length, 8u);
    EXPECT_NE(fake::seen().send_sge.lkey, 0u);
    EXPECT_EQ(fake::seen().send_wr.wr.rdma.rkey, 77u);
}

TEST_F(QpTest, AtomicWriteIsAFencedInlineWrite) {
    ASSERT_EQ(create_active(), 0);
    prov::SendWr wr;
    wr.op = prov::WrOp::kAtomicWrite;
    wr.value = 0x1122334455667788;
    ASSERT_EQ(qp_->post_send(prov::SendWr(wr)), 0);
    EXPECT_EQ(fake::seen().send_wr.opcode, IBV_WR_RDMA_WRITE);
    EXPECT_EQ(fake::seen().send_wr.send_flags & (IBV_SEND_INLINE | IBV_SEND_FENCE),
              static_cast<unsigned>(IBV_SEND_INLINE | IBV_SEND_FENCE));
    EXPECT_EQ(fake::seen().send_sge.length, 8u);
}

}  // namespace
}  // namespace rpma::test
