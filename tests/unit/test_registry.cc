// Picking the provider (src/provider/registry.cc): 127.0.0.1 is a tcp device, RPMA_PROVIDER may
// name tcp (or be empty), any other name fails with RPMA_E_PROVIDER, and a context the library
// did not hand out maps to no device.
#include <gtest/gtest.h>
#include <librpma.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "provider/provider.h"

using namespace rpma;

namespace {

// Sets RPMA_PROVIDER for one test and puts back what was there: the unit tests share a process.
class ProviderEnv {
  public:
    explicit ProviderEnv(const char *value) {
        if (const char *old = std::getenv(kName)) old_ = old;
        ::setenv(kName, value, 1);
    }
    ~ProviderEnv() {
        if (old_)
            ::setenv(kName, old_->c_str(), 1);
        else
            ::unsetenv(kName);
    }

  private:
    static constexpr const char *kName = "RPMA_PROVIDER";
    std::optional<std::string> old_;
};

int Lookup(ibv_context **ctx) {
    *ctx = nullptr;
    return prov::lookup_device("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, ctx);
}

TEST(Registry, LoopbackIsADevice) {
    ibv_context *ctx;
    ASSERT_EQ(Lookup(&ctx), 0);
    ASSERT_NE(ctx, nullptr);
    prov::Device *dev = prov::device_from_context(ctx);
    ASSERT_NE(dev, nullptr);
    EXPECT_EQ(dev->context(), ctx);
    // the same address gives the same device
    ibv_context *again;
    ASSERT_EQ(Lookup(&again), 0);
    EXPECT_EQ(prov::device_from_context(again), dev);
}

TEST(Registry, UnknownProviderFails) {
    ProviderEnv env("bogus");
    ibv_context *ctx;
    EXPECT_EQ(Lookup(&ctx), RPMA_E_PROVIDER);
    EXPECT_EQ(ctx, nullptr);
}

TEST(Registry, TcpOrEmptyProviderWorks) {
    {
        ProviderEnv env("tcp");
        ibv_context *ctx;
        EXPECT_EQ(Lookup(&ctx), 0);
        EXPECT_NE(prov::device_from_context(ctx), nullptr);
    }
    {
        ProviderEnv env("");
        ibv_context *ctx;
        EXPECT_EQ(Lookup(&ctx), 0);
    }
    {
        ProviderEnv env("TCP");  // names are exact
        ibv_context *ctx;
        EXPECT_EQ(Lookup(&ctx), RPMA_E_PROVIDER);
    }
}

TEST(Registry, ForeignContextIsNoDevice) {
    ibv_context foreign{};
    EXPECT_EQ(prov::device_from_context(&foreign), nullptr);
    EXPECT_EQ(prov::device_from_context(nullptr), nullptr);
}

}  // namespace
