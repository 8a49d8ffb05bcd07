// The registry's choice of the verbs provider when RPMA_PROVIDER is unset: an address that
// rdma_cm binds to a device goes to verbs; without the rdma_cm device node, or for an address that
// resolves to loopback, rdma_cm is never asked, and a miss is no error.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

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

// Every spelling of loopback, on both sides: one side on tcp and the other on verbs could not
// meet (127.1 was taken for a remote RDMA address, and bound locally to no device).
class LoopbackTest
    : public RegistryTest,
      public ::testing::WithParamInterface<std::tuple<std::string, rpma_util_ibv_context_type>> {};

TEST_P(LoopbackTest, AutoKeepsLoopbackOffRdmaCm) {
    const auto [addr, type] = GetParam();
    fake::set_stack_present(true);
    ibv_context *ctx = nullptr;
    prov::lookup_device(addr.c_str(), type, &ctx);  // tcp's own lookup may fail without IPv6
    EXPECT_NE(ctx, fake::context());
    EXPECT_EQ(fake::calls("rdma_getaddrinfo"), 0);
}

INSTANTIATE_TEST_SUITE_P(Spellings, LoopbackTest,
                         ::testing::Combine(::testing::ValuesIn(std::vector<std::string>{
                                                "127.0.0.1", "127.1", "127.0.1.1", "2130706433",
                                                "localhost", "::1", "::ffff:127.0.0.1"}),
                                            ::testing::Values(RPMA_UTIL_IBV_CONTEXT_LOCAL,
                                                              RPMA_UTIL_IBV_CONTEXT_REMOTE)),
                         [](const auto &info) {
                             std::string name = std::get<0>(info.param);
                             for (char &c : name)
                                 if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                             bool local = std::get<1>(info.param) == RPMA_UTIL_IBV_CONTEXT_LOCAL;
                             return name + (local ? "_local" : "_remote");
                         });

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
