// verbs::SharedRecvQueue::post: the receive posted, and ibv_post_srq_recv failing.
#include <cerrno>
#include <cstring>
#include <vector>

#include "provider/verbs/domain.h"
#include "provider/verbs/region.h"
#include "provider/verbs/shared_recv_queue.h"
#include "verbs_test.h"

namespace rpma::test {
namespace {

class SrqTest : public VerbsTest {
  protected:
    void SetUp() override {
        VerbsTest::SetUp();
        ASSERT_EQ(verbs::Domain::create(fake::context(), &dom_), 0);
        ASSERT_EQ(dom_->create_srq(16, &srq_), 0);
        ASSERT_EQ(dom_->register_memory(buf_.data(), buf_.size(), RPMA_MR_USAGE_RECV, &mr_), 0);
    }
    void TearDown() override {
        dom_->deregister(mr_);
        mr_.reset();
        srq_.reset();
        dom_.reset();
        VerbsTest::TearDown();
    }
    std::vector<char> buf_ = std::vector<char>(256);
    std::unique_ptr<verbs::Domain> dom_;
    std::unique_ptr<prov::SharedRecvQueue> srq_;
    std::shared_ptr<prov::MemoryRegion> mr_;
};

TEST_F(SrqTest, PostsTheBufferWithItsLkey) {
    prov::RecvWr r{mr_, buf_.data() + 16, 64, 99, true};
    ASSERT_EQ(srq_->post(r), 0);
    EXPECT_EQ(fake::seen().recv_wr.wr_id, 99u);
    EXPECT_EQ(fake::seen().recv_wr.num_sge, 1);
    EXPECT_EQ(fake::seen().recv_sge.addr, reinterpret_cast<uintptr_t>(buf_.data() + 16));
    EXPECT_EQ(fake::seen().recv_sge.length, 64u);
    EXPECT_EQ(fake::seen().recv_sge.lkey, verbs::lkey_of(mr_.get()));
}

TEST_F(SrqTest, ZeroByteReceiveHasNoScatterEntry) {
    prov::RecvWr r{};
    r.wr_id = 5;
    ASSERT_EQ(srq_->post(r), 0);
    EXPECT_EQ(fake::seen().recv_wr.num_sge, 0);
}

TEST_F(SrqTest, PostFails) {
    fake::fail("ibv_post_srq_recv", ENOMEM);
    prov::RecvWr r{mr_, buf_.data(), 64, 1, true};
    EXPECT_EQ(srq_->post(r), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("ibv_post_srq_recv", std::strerror(ENOMEM)));
}

}  // namespace
}  // namespace rpma::test
