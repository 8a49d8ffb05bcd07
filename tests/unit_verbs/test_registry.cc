// The registry's choice of the verbs provider when RPMA_PROVIDER is unset: an address that
// rdma_cm binds to a device goes to verbs; without the rdma_cm device node, or for loopback,
// rdma_cm is never asked, and a miss is no error.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "provider/provider.h"
#include "verbs_test.h"

namespace rpma::test {
namespace {

class RegistryTest : public VerbsTest {
  protected:
    void SetUp() override {
        VerbsTest::SetUp();
        ::unsetenv("RPMA_PROVIDER");
    }
};

TEST_F(RegistryTest, AutoTakesTheDeviceRdmaCmFinds) {
    fake::set_stack_present(true);
    ibv_context *ctx = nullptr;
    ASSERT_EQ(prov::lookup_device("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx), 0);
    EXPECT_EQ(ctx, fake::context());
    EXPECT_NE(prov::device_from_context(ctx), nullptr);
}

TEST_F(RegistryTest, AutoAsksNothingWithoutTheStack) {
    ibv_context *ctx = nullptr;
    prov::lookup_device("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx);
    EXPECT_NE(ctx, fake::context());
    EXPECT_EQ(fake::calls("rdma_getaddrinfo"), 0);
}

TEST_F(RegistryTest, AutoKeepsLoopbackOffRdmaCm) {
    fake::set_stack_present(true);
    ibv_context *ctx = nullptr;
    ASSERT_EQ(prov::lookup_device("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx), 0);
    EXPECT_NE(ctx, fake::context());
    EXPECT_EQ(fake::calls("rdma_getaddrinfo"), 0);
}

TEST_F(RegistryTest, AutoMissIsNoError) {
    fake::set_stack_present(true);
    fake::fail("rdma_resolve_addr", EHOSTUNREACH);
    ibv_context *ctx = nullptr;
    prov::lookup_device("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx);
    EXPECT_NE(ctx, fake::context());
    EXPECT_FALSE(logged_error("rdma_resolve_addr"));
    EXPECT_TRUE(logged(RPMA_LOG_LEVEL_INFO, {"rdma_resolve_addr", std::strerror(EHOSTUNREACH)}));
}

}  // namespace
}  // namespace rpma::test
