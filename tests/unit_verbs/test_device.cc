// verbs::Device: finding the device for an address (every rdma_cm step failing in turn, each
// freeing what came before) and the ODP query.
#include <cerrno>
#include <cstring>

#include "provider/verbs/device.h"
#include "verbs_test.h"

namespace rpma::test {
namespace {

using verbs::Device;

class DeviceTest : public VerbsTest {
  protected:
    void SetUp() override {
        VerbsTest::SetUp();
        fake::set_stack_present(true);
    }
};

TEST_F(DeviceTest, NoRdmaCmDeviceNode) {
    fake::set_stack_present(false);
    EXPECT_FALSE(Device::stack_present());
    ibv_context *ctx = nullptr;
    EXPECT_EQ(Device::lookup("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, false, &ctx),
              RPMA_E_PROVIDER);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_TRUE(logged_error("no local RDMA device for '192.0.2.1'", "no /dev/infiniband/rdma_cm"));
    EXPECT_EQ(fake::calls("rdma_getaddrinfo"), 0);
}

TEST_F(DeviceTest, LocalLookupFinds) {
    ibv_context *ctx = nullptr;
    ASSERT_EQ(Device::lookup("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, false, &ctx), 0);
    EXPECT_EQ(ctx, fake::context());
    EXPECT_NE(Device::from_context(ctx), nullptr);
    EXPECT_EQ(Device::from_context(ctx)->context(), ctx);
    EXPECT_EQ(fake::calls("rdma_bind_addr"), 1);
    EXPECT_EQ(fake::calls("rdma_resolve_addr"), 0);
}

TEST_F(DeviceTest, RemoteLookupResolves) {
    ibv_context *ctx = nullptr;
    ASSERT_EQ(Device::lookup("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, false, &ctx), 0);
    EXPECT_EQ(ctx, fake::context());
    EXPECT_EQ(fake::calls("rdma_resolve_addr"), 1);
    EXPECT_EQ(fake::calls("rdma_bind_addr"), 0);
}

struct StepCase {
    const char *fn;
    rpma_util_ibv_context_type type;
    int err;
};

void PrintTo(const StepCase &c, std::ostream *os) {
    *os << c.fn << (c.type == RPMA_UTIL_IBV_CONTEXT_LOCAL ? " (local)" : " (remote)");
}

class DeviceStepTest : public DeviceTest, public ::testing::WithParamInterface<StepCase> {};

TEST_P(DeviceStepTest, FailsFreeingWhatCameBefore) {
    const StepCase &c = GetParam();
    fake::fail(c.fn, c.err);
    ibv_context *ctx = nullptr;
    EXPECT_EQ(Device::lookup("192.0.2.1", c.type, false, &ctx), RPMA_E_PROVIDER);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_TRUE(logged_error(std::string(c.fn) + ": " + std::strerror(c.err))) << logs();
    // TearDown: the addrinfo and the id are gone
}

INSTANTIATE_TEST_SUITE_P(
    Steps, DeviceStepTest,
    ::testing::Values(StepCase{"rdma_getaddrinfo", RPMA_UTIL_IBV_CONTEXT_LOCAL, ENODEV},
                      StepCase{"rdma_create_id", RPMA_UTIL_IBV_CONTEXT_LOCAL, ENOMEM},
                      StepCase{"rdma_bind_addr", RPMA_UTIL_IBV_CONTEXT_LOCAL, EADDRNOTAVAIL},
                      StepCase{"rdma_create_id", RPMA_UTIL_IBV_CONTEXT_REMOTE, EMFILE},
                      StepCase{"rdma_resolve_addr", RPMA_UTIL_IBV_CONTEXT_REMOTE, ETIMEDOUT}));

TEST_F(DeviceTest, BoundToNoDevice) {
    fake::set_bind_no_device(true);
    ibv_context *ctx = nullptr;
    EXPECT_EQ(Device::lookup("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, false, &ctx),
              RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("rdma_cm bound it to no device"));
}

TEST_F(DeviceTest, QuietMissIsInfoOnly) {
    fake::fail("rdma_bind_addr", EADDRNOTAVAIL);
    ibv_context *ctx = nullptr;
    EXPECT_EQ(Device::lookup("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, true, &ctx),
              RPMA_E_PROVIDER);
    EXPECT_FALSE(logged(RPMA_LOG_LEVEL_ERROR, {""}));
    EXPECT_TRUE(logged(RPMA_LOG_LEVEL_INFO, {"rdma_bind_addr", std::strerror(EADDRNOTAVAIL)}));
}

TEST_F(DeviceTest, ForkInitFailureIsNotFatal) {
    fake::fail("ibv_fork_init", ENOSYS);
    ibv_context *ctx = nullptr;
    EXPECT_EQ(Device::lookup("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, false, &ctx), 0);
    // ibv_fork_init runs once per process: only the first lookup of this binary's run calls it.
    if (fake::calls("ibv_fork_init") == 1) {
        EXPECT_TRUE(logged(RPMA_LOG_LEVEL_INFO, {"ibv_fork_init", std::strerror(ENOSYS)}));
    }
}

// A kernel that copies DMA-pinned pages into a child needs no ibv_fork_init, and upstream calls
// none: rdma-core 44's would mark every registered page MADV_DONTFORK, so a child would lose
// those pages and whatever shared them.
TEST_F(DeviceTest, ForkInitOnlyWhereTheKernelNeedsIt) {
    EXPECT_EQ(Device::set_up_fork_support(IBV_FORK_UNNEEDED), 0);
    EXPECT_EQ(fake::calls("ibv_fork_init"), 0);
    EXPECT_EQ(Device::set_up_fork_support(IBV_FORK_DISABLED), 0);
    EXPECT_EQ(fake::calls("ibv_fork_init"), 1);
    fake::fail("ibv_fork_init", ENOSYS);
    EXPECT_EQ(Device::set_up_fork_support(IBV_FORK_DISABLED), ENOSYS);
    EXPECT_TRUE(logged(RPMA_LOG_LEVEL_INFO, {"ibv_fork_init", std::strerror(ENOSYS)}));
}

TEST_F(DeviceTest, OdpQueryFails) {
    Device d(fake::context());
    fake::fail("ibv_query_device_ex", EIO);
    int odp = -1;
    EXPECT_EQ(d.odp_capable(&odp), RPMA_E_PROVIDER);
    EXPECT_EQ(odp, -1);
    EXPECT_TRUE(logged_error("ibv_query_device_ex", std::strerror(EIO)));
}

TEST_F(DeviceTest, OdpNeedsEveryRcOperation) {
    Device d(fake::context());
    int odp = -1;
    ASSERT_EQ(d.odp_capable(&odp), 0);
    EXPECT_EQ(odp, 0);
    fake::device_attr().odp_general = IBV_ODP_SUPPORT;
    fake::device_attr().rc_odp =
        IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE;
    ASSERT_EQ(d.odp_capable(&odp), 0);
    EXPECT_EQ(odp, 0);
    fake::device_attr().rc_odp |= IBV_ODP_SUPPORT_READ;
    ASSERT_EQ(d.odp_capable(&odp), 0);
    EXPECT_EQ(odp, 1);
}

}  // namespace
}  // namespace rpma::test
