// rpma_conn_cfg_*: defaults, every setter/getter pair, every documented error.
#include <gtest/gtest.h>
#include <librpma.h>

#include <ostream>
#include <string>

#include "core/conn_cfg.h"
#include "fail_alloc.h"

namespace {

class ConnCfg : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_EQ(rpma_conn_cfg_new(&cfg_), 0); }
    void TearDown() override { EXPECT_EQ(rpma_conn_cfg_delete(&cfg_), 0); }
    rpma_conn_cfg *cfg_ = nullptr;
};

TEST_F(ConnCfg, NewFillsDefaults) {
    ASSERT_NE(cfg_, nullptr);
    int timeout = -1;
    uint32_t cq = 0, sq = 0, rq = 0, rcq = 99;
    bool shared = true;
    rpma_srq *srq = reinterpret_cast<rpma_srq *>(0x1);
    ASSERT_EQ(rpma_conn_cfg_get_timeout(cfg_, &timeout), 0);
    ASSERT_EQ(rpma_conn_cfg_get_cq_size(cfg_, &cq), 0);
    ASSERT_EQ(rpma_conn_cfg_get_sq_size(cfg_, &sq), 0);
    ASSERT_EQ(rpma_conn_cfg_get_rq_size(cfg_, &rq), 0);
    ASSERT_EQ(rpma_conn_cfg_get_rcq_size(cfg_, &rcq), 0);
    ASSERT_EQ(rpma_conn_cfg_get_compl_channel(cfg_, &shared), 0);
    ASSERT_EQ(rpma_conn_cfg_get_srq(cfg_, &srq), 0);
    EXPECT_EQ(timeout, RPMA_DEFAULT_TIMEOUT_MS);
    EXPECT_EQ(timeout, 1000);
    EXPECT_EQ(cq, 10u);
    EXPECT_EQ(sq, 10u);
    EXPECT_EQ(rq, 10u);
    EXPECT_EQ(rcq, 0u);
    EXPECT_FALSE(shared);
    EXPECT_EQ(srq, nullptr);
}

TEST(ConnCfgCore, DefaultsObjectMatchesNew) {
    const rpma::ConnCfg &d = rpma::ConnCfg::defaults();
    EXPECT_EQ(d.timeout_ms(), 1000);
    EXPECT_EQ(d.cq_size(), 10u);
    EXPECT_EQ(d.sq_size(), 10u);
    EXPECT_EQ(d.rq_size(), 10u);
    EXPECT_EQ(d.rcq_size(), 0u);
    EXPECT_FALSE(d.shared_channel());
    EXPECT_EQ(d.srq(), nullptr);
    EXPECT_EQ(&d, &rpma::ConnCfg::defaults());
}

TEST(ConnCfgCore, GettersSeeTheCApiSetters) {
    rpma_conn_cfg *cfg = nullptr;
    ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
    auto *srq = reinterpret_cast<rpma_srq *>(0x5000);
    ASSERT_EQ(rpma_conn_cfg_set_timeout(cfg, 250), 0);
    ASSERT_EQ(rpma_conn_cfg_set_cq_size(cfg, 1), 0);
    ASSERT_EQ(rpma_conn_cfg_set_sq_size(cfg, 2), 0);
    ASSERT_EQ(rpma_conn_cfg_set_rq_size(cfg, 3), 0);
    ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 4), 0);
    ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
    ASSERT_EQ(rpma_conn_cfg_set_srq(cfg, srq), 0);
    const auto *c = reinterpret_cast<const rpma::ConnCfg *>(cfg);
    EXPECT_EQ(c->timeout_ms(), 250);
    EXPECT_EQ(c->cq_size(), 1u);
    EXPECT_EQ(c->sq_size(), 2u);
    EXPECT_EQ(c->rq_size(), 3u);
    EXPECT_EQ(c->rcq_size(), 4u);
    EXPECT_TRUE(c->shared_channel());
    EXPECT_EQ(c->srq(), srq);
    ASSERT_EQ(rpma_conn_cfg_delete(&cfg), 0);
}

TEST(ConnCfgNew, InvalCfgPtrNull) {
    EXPECT_EQ(rpma_conn_cfg_new(nullptr), RPMA_E_INVAL);
}

TEST(ConnCfgNew, NomemLeavesCfgPtrAlone) {
    rpma_conn_cfg *cfg = reinterpret_cast<rpma_conn_cfg *>(0x1234);
    int ret;
    {
        rpma::test::FailAllocations fail;
        ret = rpma_conn_cfg_new(&cfg);
        EXPECT_GT(fail.refused(), 0);
    }
    EXPECT_EQ(ret, RPMA_E_NOMEM);
    EXPECT_EQ(cfg, reinterpret_cast<rpma_conn_cfg *>(0x1234));
}

TEST(ConnCfgDelete, SetsPointerToNull) {
    rpma_conn_cfg *cfg = nullptr;
    ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
    EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
    EXPECT_EQ(cfg, nullptr);
}

TEST(ConnCfgDelete, NullObjectIsNoop) {
    rpma_conn_cfg *cfg = nullptr;
    EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
    EXPECT_EQ(cfg, nullptr);
}

TEST(ConnCfgDelete, InvalCfgPtrNull) {
    EXPECT_EQ(rpma_conn_cfg_delete(nullptr), RPMA_E_INVAL);
}

TEST_F(ConnCfg, TimeoutRoundTrip) {
    for (int t : {0, 1, 1500, 2147483647}) {
        ASSERT_EQ(rpma_conn_cfg_set_timeout(cfg_, t), 0);
        int got = -1;
        ASSERT_EQ(rpma_conn_cfg_get_timeout(cfg_, &got), 0);
        EXPECT_EQ(got, t);
    }
}

TEST_F(ConnCfg, SetTimeoutInvalCfgNull) {
    EXPECT_EQ(rpma_conn_cfg_set_timeout(nullptr, 100), RPMA_E_INVAL);
}

TEST_F(ConnCfg, SetTimeoutInvalNegativeKeepsOldValue) {
    ASSERT_EQ(rpma_conn_cfg_set_timeout(cfg_, 321), 0);
    EXPECT_EQ(rpma_conn_cfg_set_timeout(cfg_, -1), RPMA_E_INVAL);
    EXPECT_EQ(rpma_conn_cfg_set_timeout(cfg_, -2147483647 - 1), RPMA_E_INVAL);
    int got = 0;
    ASSERT_EQ(rpma_conn_cfg_get_timeout(cfg_, &got), 0);
    EXPECT_EQ(got, 321);
}

TEST_F(ConnCfg, GetTimeoutInvalCfgNull) {
    int got = 77;
    EXPECT_EQ(rpma_conn_cfg_get_timeout(nullptr, &got), RPMA_E_INVAL);
    EXPECT_EQ(got, 77);
}

TEST_F(ConnCfg, GetTimeoutInvalOutNull) {
    EXPECT_EQ(rpma_conn_cfg_get_timeout(cfg_, nullptr), RPMA_E_INVAL);
}

// The four uint32_t sizes share one shape: a parameterised suite runs each case for all four.
struct SizeCalls {
    const char *name;
    int (*set)(rpma_conn_cfg *, uint32_t);
    int (*get)(const rpma_conn_cfg *, uint32_t *);
};

// Names the case in test listings instead of dumping the function pointers.
void PrintTo(const SizeCalls &c, std::ostream *os) {
    *os << c.name;
}

class ConnCfgSize : public ConnCfg, public ::testing::WithParamInterface<SizeCalls> {};

TEST_P(ConnCfgSize, RoundTrip) {
    for (uint32_t v : {0u, 1u, 10u, 4096u, 0xffffffffu}) {
        ASSERT_EQ(GetParam().set(cfg_, v), 0);
        uint32_t got = 12345;
        ASSERT_EQ(GetParam().get(cfg_, &got), 0);
        EXPECT_EQ(got, v);
    }
}

TEST_P(ConnCfgSize, SetInvalCfgNull) {
    EXPECT_EQ(GetParam().set(nullptr, 5), RPMA_E_INVAL);
}

TEST_P(ConnCfgSize, GetInvalCfgNull) {
    uint32_t got = 12345;
    EXPECT_EQ(GetParam().get(nullptr, &got), RPMA_E_INVAL);
    EXPECT_EQ(got, 12345u);
}

TEST_P(ConnCfgSize, GetInvalOutNull) {
    EXPECT_EQ(GetParam().get(cfg_, nullptr), RPMA_E_INVAL);
}

TEST_P(ConnCfgSize, SizesAreIndependent) {
    ASSERT_EQ(GetParam().set(cfg_, 777), 0);
    const SizeCalls all[] = {
        {"cq", rpma_conn_cfg_set_cq_size, rpma_conn_cfg_get_cq_size},
        {"sq", rpma_conn_cfg_set_sq_size, rpma_conn_cfg_get_sq_size},
        {"rq", rpma_conn_cfg_set_rq_size, rpma_conn_cfg_get_rq_size},
        {"rcq", rpma_conn_cfg_set_rcq_size, rpma_conn_cfg_get_rcq_size},
    };
    for (const auto &other : all) {
        uint32_t got = 0;
        ASSERT_EQ(other.get(cfg_, &got), 0);
        if (other.get == GetParam().get)
            EXPECT_EQ(got, 777u);
        else
            EXPECT_EQ(got, std::string(other.name) == "rcq" ? 0u : 10u) << other.name;
    }
}

INSTANTIATE_TEST_SUITE_P(
    All, ConnCfgSize,
    ::testing::Values(SizeCalls{"cq", rpma_conn_cfg_set_cq_size, rpma_conn_cfg_get_cq_size},
                      SizeCalls{"sq", rpma_conn_cfg_set_sq_size, rpma_conn_cfg_get_sq_size},
                      SizeCalls{"rq", rpma_conn_cfg_set_rq_size, rpma_conn_cfg_get_rq_size},
                      SizeCalls{"rcq", rpma_conn_cfg_set_rcq_size, rpma_conn_cfg_get_rcq_size}),
    [](const ::testing::TestParamInfo<SizeCalls> &info) { return std::string(info.param.name); });

TEST_F(ConnCfg, ComplChannelRoundTrip) {
    bool shared = false;
    ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg_, true), 0);
    ASSERT_EQ(rpma_conn_cfg_get_compl_channel(cfg_, &shared), 0);
    EXPECT_TRUE(shared);
    ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg_, false), 0);
    ASSERT_EQ(rpma_conn_cfg_get_compl_channel(cfg_, &shared), 0);
    EXPECT_FALSE(shared);
}

TEST_F(ConnCfg, SetComplChannelInvalCfgNull) {
    EXPECT_EQ(rpma_conn_cfg_set_compl_channel(nullptr, true), RPMA_E_INVAL);
}

TEST_F(ConnCfg, GetComplChannelInvalCfgNull) {
    bool shared = true;
    EXPECT_EQ(rpma_conn_cfg_get_compl_channel(nullptr, &shared), RPMA_E_INVAL);
    EXPECT_TRUE(shared);
}

TEST_F(ConnCfg, GetComplChannelInvalOutNull) {
    EXPECT_EQ(rpma_conn_cfg_get_compl_channel(cfg_, nullptr), RPMA_E_INVAL);
}

TEST_F(ConnCfg, SrqRoundTrip) {
    // The cfg only stores the handle; it never dereferences it.
    auto *srq = reinterpret_cast<rpma_srq *>(0xdead0000);
    rpma_srq *got = nullptr;
    ASSERT_EQ(rpma_conn_cfg_set_srq(cfg_, srq), 0);
    ASSERT_EQ(rpma_conn_cfg_get_srq(cfg_, &got), 0);
    EXPECT_EQ(got, srq);
    ASSERT_EQ(rpma_conn_cfg_set_srq(cfg_, nullptr), 0);
    ASSERT_EQ(rpma_conn_cfg_get_srq(cfg_, &got), 0);
    EXPECT_EQ(got, nullptr);
}

TEST_F(ConnCfg, SetSrqInvalCfgNull) {
    EXPECT_EQ(rpma_conn_cfg_set_srq(nullptr, reinterpret_cast<rpma_srq *>(0x10)), RPMA_E_INVAL);
}

TEST_F(ConnCfg, GetSrqInvalCfgNull) {
    auto *sentinel = reinterpret_cast<rpma_srq *>(0x20);
    rpma_srq *got = sentinel;
    EXPECT_EQ(rpma_conn_cfg_get_srq(nullptr, &got), RPMA_E_INVAL);
    EXPECT_EQ(got, sentinel);
}

TEST_F(ConnCfg, GetSrqInvalOutNull) {
    EXPECT_EQ(rpma_conn_cfg_get_srq(cfg_, nullptr), RPMA_E_INVAL);
}

TEST(ConnCfgObjects, AreIndependent) {
    rpma_conn_cfg *a = nullptr, *b = nullptr;
    ASSERT_EQ(rpma_conn_cfg_new(&a), 0);
    ASSERT_EQ(rpma_conn_cfg_new(&b), 0);
    ASSERT_NE(a, b);
    ASSERT_EQ(rpma_conn_cfg_set_cq_size(a, 64), 0);
    uint32_t got = 0;
    ASSERT_EQ(rpma_conn_cfg_get_cq_size(b, &got), 0);
    EXPECT_EQ(got, 10u);
    EXPECT_EQ(rpma::ConnCfg::defaults().cq_size(), 10u);
    ASSERT_EQ(rpma_conn_cfg_delete(&a), 0);
    ASSERT_EQ(rpma_conn_cfg_delete(&b), 0);
}

}  // namespace
