// rpma_srq_cfg_*: defaults, setters/getters, every documented error.
#include <gtest/gtest.h>
#include <librpma.h>

#include "core/srq_cfg.h"
#include "fail_alloc.h"

namespace {

class SrqCfg : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_EQ(rpma_srq_cfg_new(&cfg_), 0); }
    void TearDown() override { EXPECT_EQ(rpma_srq_cfg_delete(&cfg_), 0); }
    rpma_srq_cfg *cfg_ = nullptr;
};

TEST_F(SrqCfg, NewFillsDefaults) {
    ASSERT_NE(cfg_, nullptr);
    uint32_t rq = 0, rcq = 0;
    ASSERT_EQ(rpma_srq_cfg_get_rq_size(cfg_, &rq), 0);
    ASSERT_EQ(rpma_srq_cfg_get_rcq_size(cfg_, &rcq), 0);
    EXPECT_EQ(rq, 100u);
    EXPECT_EQ(rcq, 100u);
}

TEST(SrqCfgCore, DefaultsObject) {
    EXPECT_EQ(rpma::SrqCfg::defaults().rq_size(), 100u);
    EXPECT_EQ(rpma::SrqCfg::defaults().rcq_size(), 100u);
    EXPECT_EQ(&rpma::SrqCfg::defaults(), &rpma::SrqCfg::defaults());
}

TEST(SrqCfgNew, InvalCfgPtrNull) {
    EXPECT_EQ(rpma_srq_cfg_new(nullptr), RPMA_E_INVAL);
}

TEST(SrqCfgNew, NomemLeavesCfgPtrAlone) {
    auto *sentinel = reinterpret_cast<rpma_srq_cfg *>(0x1234);
    rpma_srq_cfg *cfg = sentinel;
    int ret;
    {
        rpma::test::FailAllocations fail;
        ret = rpma_srq_cfg_new(&cfg);
    }
    EXPECT_EQ(ret, RPMA_E_NOMEM);
    EXPECT_EQ(cfg, sentinel);
}

TEST(SrqCfgDelete, SetsPointerToNull) {
    rpma_srq_cfg *cfg = nullptr;
    ASSERT_EQ(rpma_srq_cfg_new(&cfg), 0);
    EXPECT_EQ(rpma_srq_cfg_delete(&cfg), 0);
    EXPECT_EQ(cfg, nullptr);
}

TEST(SrqCfgDelete, NullObjectIsNoop) {
    rpma_srq_cfg *cfg = nullptr;
    EXPECT_EQ(rpma_srq_cfg_delete(&cfg), 0);
    EXPECT_EQ(cfg, nullptr);
}

TEST(SrqCfgDelete, InvalCfgPtrNull) {
    EXPECT_EQ(rpma_srq_cfg_delete(nullptr), RPMA_E_INVAL);
}

TEST_F(SrqCfg, RqSizeRoundTrip) {
    for (uint32_t v : {0u, 1u, 512u, 0xffffffffu}) {
        ASSERT_EQ(rpma_srq_cfg_set_rq_size(cfg_, v), 0);
        uint32_t got = 7;
        ASSERT_EQ(rpma_srq_cfg_get_rq_size(cfg_, &got), 0);
        EXPECT_EQ(got, v);
        EXPECT_EQ(reinterpret_cast<const rpma::SrqCfg *>(cfg_)->rq_size(), v);
    }
    uint32_t rcq = 0;
    ASSERT_EQ(rpma_srq_cfg_get_rcq_size(cfg_, &rcq), 0);
    EXPECT_EQ(rcq, 100u);  // untouched by the rq setter
}

TEST_F(SrqCfg, RcqSizeRoundTripIncludingZero) {
    for (uint32_t v : {0u, 1u, 512u, 0xffffffffu}) {
        ASSERT_EQ(rpma_srq_cfg_set_rcq_size(cfg_, v), 0);
        uint32_t got = 7;
        ASSERT_EQ(rpma_srq_cfg_get_rcq_size(cfg_, &got), 0);
        EXPECT_EQ(got, v);
        EXPECT_EQ(reinterpret_cast<const rpma::SrqCfg *>(cfg_)->rcq_size(), v);
    }
    uint32_t rq = 0;
    ASSERT_EQ(rpma_srq_cfg_get_rq_size(cfg_, &rq), 0);
    EXPECT_EQ(rq, 100u);
}

TEST_F(SrqCfg, SetRqSizeInvalCfgNull) {
    EXPECT_EQ(rpma_srq_cfg_set_rq_size(nullptr, 5), RPMA_E_INVAL);
}

TEST_F(SrqCfg, GetRqSizeInvalCfgNull) {
    uint32_t got = 7;
    EXPECT_EQ(rpma_srq_cfg_get_rq_size(nullptr, &got), RPMA_E_INVAL);
    EXPECT_EQ(got, 7u);
}

TEST_F(SrqCfg, GetRqSizeInvalOutNull) {
    EXPECT_EQ(rpma_srq_cfg_get_rq_size(cfg_, nullptr), RPMA_E_INVAL);
}

TEST_F(SrqCfg, SetRcqSizeInvalCfgNull) {
    EXPECT_EQ(rpma_srq_cfg_set_rcq_size(nullptr, 5), RPMA_E_INVAL);
}

TEST_F(SrqCfg, GetRcqSizeInvalCfgNull) {
    uint32_t got = 7;
    EXPECT_EQ(rpma_srq_cfg_get_rcq_size(nullptr, &got), RPMA_E_INVAL);
    EXPECT_EQ(got, 7u);
}

TEST_F(SrqCfg, GetRcqSizeInvalOutNull) {
    EXPECT_EQ(rpma_srq_cfg_get_rcq_size(cfg_, nullptr), RPMA_E_INVAL);
}

}  // namespace
