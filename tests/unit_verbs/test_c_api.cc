// The verbs provider's error paths seen through the C API with RPMA_PROVIDER=verbs: the codes
// rpma_* functions return for failing rdma-core calls, as librpma 1.3's manual pages give them.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "verbs_test.h"

namespace rpma::test {
namespace {

class CApiTest : public VerbsTest {
  protected:
    void SetUp() override {
        VerbsTest::SetUp();
        ::setenv("RPMA_PROVIDER", "verbs", 1);
        fake::set_stack_present(true);
    }
    void TearDown() override {
        if (peer_) {
            EXPECT_EQ(rpma_peer_delete(&peer_), 0);
        }
        ::unsetenv("RPMA_PROVIDER");
        VerbsTest::TearDown();
    }
    void open_peer() {
        ASSERT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx_), 0);
        ASSERT_EQ(ctx_, fake::context());
        ASSERT_EQ(rpma_peer_new(ctx_, &peer_), 0);
    }
    ibv_context *ctx_ = nullptr;
    rpma_peer *peer_ = nullptr;
};

TEST_F(CApiTest, NoRdmaStack) {
    fake::set_stack_present(false);
    EXPECT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx_),
              RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("RPMA_PROVIDER=verbs", "no /dev/infiniband/rdma_cm"));
}

TEST_F(CApiTest, AddressWithoutDevice) {
    fake::fail("rdma_resolve_addr", EHOSTUNREACH);
    EXPECT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx_),
              RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("rdma_resolve_addr", std::strerror(EHOSTUNREACH)));
}

TEST_F(CApiTest, OdpQueryFails) {
    open_peer();
    fake::fail("ibv_query_device_ex", EIO);
    int odp = -1;
    EXPECT_EQ(rpma_utils_ibv_context_is_odp_capable(ctx_, &odp), RPMA_E_PROVIDER);
}

TEST_F(CApiTest, PeerNewOutOfMemory) {
    ASSERT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx_), 0);
    fake::fail("ibv_alloc_pd", ENOMEM);
    EXPECT_EQ(rpma_peer_new(ctx_, &peer_), RPMA_E_NOMEM);
    EXPECT_EQ(peer_, nullptr);
}

TEST_F(CApiTest, PeerNewProviderError) {
    ASSERT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx_), 0);
    fake::fail("ibv_alloc_pd", EACCES);
    EXPECT_EQ(rpma_peer_new(ctx_, &peer_), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("ibv_alloc_pd", std::strerror(EACCES)));
}

TEST_F(CApiTest, PeerNewFailureWithoutErrno) {
    ASSERT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx_), 0);
    fake::fail("ibv_alloc_pd", fake::kNoErrno);
    EXPECT_EQ(rpma_peer_new(ctx_, &peer_), RPMA_E_UNKNOWN);
}

TEST_F(CApiTest, MrRegCodes) {
    open_peer();
    std::vector<char> buf(4096);
    rpma_mr_local *mr = nullptr;
    fake::fail("ibv_reg_mr", ENOMEM);
    EXPECT_EQ(rpma_mr_reg(peer_, buf.data(), buf.size(), RPMA_MR_USAGE_READ_SRC, &mr),
              RPMA_E_NOMEM);
    fake::fail("ibv_reg_mr", EACCES);
    EXPECT_EQ(rpma_mr_reg(peer_, buf.data(), buf.size(), RPMA_MR_USAGE_READ_SRC, &mr),
              RPMA_E_PROVIDER);
    EXPECT_EQ(mr, nullptr);
    ASSERT_EQ(rpma_mr_reg(peer_, buf.data(), buf.size(), RPMA_MR_USAGE_READ_SRC, &mr), 0);
    EXPECT_EQ(rpma_mr_dereg(&mr), 0);
}

TEST_F(CApiTest, EpListenFails) {
    open_peer();
    fake::fail("rdma_bind_addr", EADDRINUSE);
    rpma_ep *ep = nullptr;
    EXPECT_EQ(rpma_ep_listen(peer_, "192.0.2.1", "7204", &ep), RPMA_E_PROVIDER);
    EXPECT_EQ(ep, nullptr);
    EXPECT_TRUE(logged_error("rdma_bind_addr", std::strerror(EADDRINUSE)));
}

TEST_F(CApiTest, ConnReqNewFails) {
    open_peer();
    fake::fail("rdma_resolve_route", ETIMEDOUT);
    rpma_conn_req *req = nullptr;
    EXPECT_EQ(rpma_conn_req_new(peer_, "192.0.2.1", "7204", nullptr, &req), RPMA_E_PROVIDER);
    EXPECT_EQ(req, nullptr);
    EXPECT_TRUE(logged_error("rdma_resolve_route", std::strerror(ETIMEDOUT)));
}

TEST_F(CApiTest, ConnReqNewAndDelete) {
    open_peer();
    rpma_conn_req *req = nullptr;
    ASSERT_EQ(rpma_conn_req_new(peer_, "192.0.2.1", "7204", nullptr, &req), 0);
    EXPECT_EQ(rpma_conn_req_delete(&req), 0);
}

}  // namespace
}  // namespace rpma::test
