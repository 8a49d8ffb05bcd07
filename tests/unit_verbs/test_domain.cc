// verbs::Domain: opening it (the device query, the port query, ibv_alloc_pd and its codes),
// closing it, and the objects it makes directly: completion channels, CQs and SRQs.
#include <cerrno>
#include <cstring>

#include "provider/verbs/completion_queue.h"
#include "provider/verbs/domain.h"
#include "verbs_test.h"

namespace rpma::test {
namespace {

using verbs::Domain;

using DomainTest = VerbsTest;

TEST_F(DomainTest, OpensAndCloses) {
    std::unique_ptr<Domain> d;
    ASSERT_EQ(Domain::create(fake::context(), &d), 0);
    EXPECT_EQ(d->caps().max_op_length, fake::device_attr().max_msg_sz);
    EXPECT_EQ(d->caps().connect_pdata_max, 56);
    EXPECT_EQ(d->caps().accept_pdata_max, 196);
    EXPECT_EQ(d->check_process("the peer"), 0);
    d.reset();
    EXPECT_EQ(fake::calls("ibv_alloc_pd"), 1);
    EXPECT_EQ(fake::calls("ibv_dealloc_pd"), 1);
}

TEST_F(DomainTest, DeviceQueryFails) {
    fake::fail("ibv_query_device_ex", EIO);
    std::unique_ptr<Domain> d;
    EXPECT_EQ(Domain::create(fake::context(), &d), RPMA_E_PROVIDER);
    EXPECT_EQ(d, nullptr);
    EXPECT_TRUE(logged_error("ibv_query_device_ex", std::strerror(EIO)));
    EXPECT_EQ(fake::calls("ibv_alloc_pd"), 0);
}

TEST_F(DomainTest, PortQueryFailureKeepsTheDefaultMessageSize) {
    fake::fail("ibv_query_port", EIO);
    std::unique_ptr<Domain> d;
    ASSERT_EQ(Domain::create(fake::context(), &d), 0);
    EXPECT_EQ(d->caps().max_op_length, 1u << 30);
}

TEST_F(DomainTest, AllocPdOutOfMemory) {
    fake::fail("ibv_alloc_pd", ENOMEM);
    std::unique_ptr<Domain> d;
    EXPECT_EQ(Domain::create(fake::context(), &d), RPMA_E_NOMEM);
    EXPECT_EQ(d, nullptr);
}

TEST_F(DomainTest, AllocPdOtherError) {
    fake::fail("ibv_alloc_pd", EACCES);
    std::unique_ptr<Domain> d;
    EXPECT_EQ(Domain::create(fake::context(), &d), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("ibv_alloc_pd", std::strerror(EACCES)));
}

TEST_F(DomainTest, DeallocPdFailureIsLogged) {
    std::unique_ptr<Domain> d;
    ASSERT_EQ(Domain::create(fake::context(), &d), 0);
    fake::fail("ibv_dealloc_pd", EBUSY);
    d.reset();
    EXPECT_TRUE(logged_error("ibv_dealloc_pd", std::strerror(EBUSY)));
}

class DomainObjectsTest : public VerbsTest {
  protected:
    void SetUp() override {
        VerbsTest::SetUp();
        ASSERT_EQ(Domain::create(fake::context(), &dom_), 0);
    }
    void TearDown() override {
        dom_.reset();
        VerbsTest::TearDown();
    }
    std::unique_ptr<Domain> dom_;
};

TEST_F(DomainObjectsTest, ChannelCreationFails) {
    fake::fail("ibv_create_comp_channel", EMFILE);
    std::unique_ptr<prov::CompletionChannel> ch;
    EXPECT_EQ(dom_->create_channel(&ch), RPMA_E_PROVIDER);
    EXPECT_EQ(ch, nullptr);
    EXPECT_TRUE(logged_error("ibv_create_comp_channel", std::strerror(EMFILE)));
}

TEST_F(DomainObjectsTest, CqCreationFails) {
    std::unique_ptr<prov::CompletionChannel> ch;
    ASSERT_EQ(dom_->create_channel(&ch), 0);
    fake::fail("ibv_create_cq", ENOMEM);
    std::unique_ptr<prov::CompletionQueue> cq;
    EXPECT_EQ(dom_->create_cq(ch.get(), false, 10, &cq), RPMA_E_PROVIDER);
    EXPECT_EQ(cq, nullptr);
    EXPECT_TRUE(logged_error("ibv_create_cq(10 entries)", std::strerror(ENOMEM)));
}

TEST_F(DomainObjectsTest, CqArmingFailsAndTheCqIsDestroyed) {
    std::unique_ptr<prov::CompletionChannel> ch;
    ASSERT_EQ(dom_->create_channel(&ch), 0);
    fake::fail("ibv_req_notify_cq", EINVAL);
    std::unique_ptr<prov::CompletionQueue> cq;
    EXPECT_EQ(dom_->create_cq(ch.get(), false, 10, &cq), RPMA_E_PROVIDER);
    EXPECT_EQ(cq, nullptr);
    EXPECT_TRUE(logged_error("ibv_req_notify_cq", std::strerror(EINVAL)));
    EXPECT_EQ(fake::calls("ibv_destroy_cq"), 1);
}

TEST_F(DomainObjectsTest, CqAndChannelTeardownFailuresAreLogged) {
    std::unique_ptr<prov::CompletionChannel> ch;
    ASSERT_EQ(dom_->create_channel(&ch), 0);
    std::unique_ptr<prov::CompletionQueue> cq;
    ASSERT_EQ(dom_->create_cq(ch.get(), false, 10, &cq), 0);
    EXPECT_EQ(cq->fd(), ch->fd());
    fake::fail("ibv_destroy_cq", EBUSY);
    fake::fail("ibv_destroy_comp_channel", EBUSY);
    cq.reset();
    ch.reset();
    EXPECT_TRUE(logged_error("ibv_destroy_cq", std::strerror(EBUSY)));
    EXPECT_TRUE(logged_error("ibv_destroy_comp_channel", std::strerror(EBUSY)));
}

TEST_F(DomainObjectsTest, SrqCreationFails) {
    fake::fail("ibv_create_srq", ENOSYS);
    std::unique_ptr<prov::SharedRecvQueue> srq;
    EXPECT_EQ(dom_->create_srq(100, &srq), RPMA_E_PROVIDER);
    EXPECT_EQ(srq, nullptr);
    EXPECT_TRUE(logged_error("ibv_create_srq(100 entries)", std::strerror(ENOSYS)));
}

TEST_F(DomainObjectsTest, SrqDestroyFailureIsLogged) {
    std::unique_ptr<prov::SharedRecvQueue> srq;
    ASSERT_EQ(dom_->create_srq(100, &srq), 0);
    fake::fail("ibv_destroy_srq", EBUSY);
    srq.reset();
    EXPECT_TRUE(logged_error("ibv_destroy_srq", std::strerror(EBUSY)));
}

}  // namespace
}  // namespace rpma::test
