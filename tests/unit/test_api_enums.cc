// Enum arguments outside their enumerators: any int is a valid C value, so the shims refuse it
// with RPMA_E_INVAL, and (under UBSan's enum check) never read it as a C++ enum.
#include <gtest/gtest.h>
#include <librpma.h>

#include <climits>

namespace {

constexpr int kOutside[] = {2, 3, -1, 1000, INT_MIN, INT_MAX};

TEST(ApiEnums, AFlushTypeOutsideTheTwoIsRefused) {
    // the checks come before any use of the handles: these are never dereferenced
    int fake_conn = 0, fake_dst = 0;
    auto *conn = reinterpret_cast<rpma_conn *>(&fake_conn);
    auto *dst = reinterpret_cast<rpma_mr_remote *>(&fake_dst);
    for (int t : kOutside)
        EXPECT_EQ(rpma_flush(conn, dst, 0, 8, static_cast<rpma_flush_type>(t),
                             RPMA_F_COMPLETION_ALWAYS, nullptr),
                  RPMA_E_INVAL)
            << "type " << t;
}

TEST(ApiEnums, AnIbvContextTypeOutsideTheTwoIsRefused) {
    for (int t : kOutside) {
        ibv_context *ctx = nullptr;
        EXPECT_EQ(rpma_utils_get_ibv_context("127.0.0.1",
                                             static_cast<rpma_util_ibv_context_type>(t), &ctx),
                  RPMA_E_INVAL)
            << "type " << t;
        EXPECT_EQ(ctx, nullptr);
    }
}

}  // namespace
