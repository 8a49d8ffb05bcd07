// verbs::Domain's memory: registration (its error codes, the On-Demand Paging retry),
// deregistration and ibv_advise_mr's codes.
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "provider/verbs/domain.h"
#include "provider/verbs/region.h"
#include "verbs_test.h"

namespace rpma::test {
namespace {

using verbs::Domain;

class RegionTest : public VerbsTest {
  protected:
    void open(bool odp) {
        if (odp) fake::device_attr().odp_general = IBV_ODP_SUPPORT;
        ASSERT_EQ(Domain::create(fake::context(), &dom_), 0);
    }
    void TearDown() override {
        dom_.reset();
        VerbsTest::TearDown();
    }
    int reg(std::shared_ptr<prov::MemoryRegion> *mr) {
        return dom_->register_memory(buf_.data(), buf_.size(), RPMA_MR_USAGE_WRITE_DST, mr);
    }
    std::unique_ptr<Domain> dom_;
    std::vector<char> buf_ = std::vector<char>(4096);
};

TEST_F(RegionTest, RegistersAndDeregistersOnce) {
    open(false);
    std::shared_ptr<prov::MemoryRegion> mr;
    ASSERT_EQ(reg(&mr), 0);
    EXPECT_EQ(mr->addr(), buf_.data());
    EXPECT_EQ(mr->size(), buf_.size());
    EXPECT_EQ(fake::seen().reg_mr_access, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
    EXPECT_NE(verbs::lkey_of(mr.get()), 0u);
    dom_->deregister(mr);
    mr.reset();  // the Region's destructor must not deregister again
    EXPECT_EQ(fake::calls("ibv_dereg_mr"), 1);
}

TEST_F(RegionTest, DeregistrationFailureIsLogged) {
    open(false);
    std::shared_ptr<prov::MemoryRegion> mr;
    ASSERT_EQ(reg(&mr), 0);
    fake::fail("ibv_dereg_mr", EBUSY);
    dom_->deregister(mr);
    EXPECT_TRUE(logged_error("ibv_dereg_mr", std::strerror(EBUSY)));
}

TEST_F(RegionTest, OutOfMemory) {
    open(false);
    fake::fail("ibv_reg_mr", ENOMEM);
    std::shared_ptr<prov::MemoryRegion> mr;
    EXPECT_EQ(reg(&mr), RPMA_E_NOMEM);
    EXPECT_EQ(mr, nullptr);
    EXPECT_TRUE(logged_error("ibv_reg_mr", std::strerror(ENOMEM)));
}

TEST_F(RegionTest, OtherErrorIsProvider) {
    open(false);
    fake::fail("ibv_reg_mr", EACCES);
    std::shared_ptr<prov::MemoryRegion> mr;
    EXPECT_EQ(reg(&mr), RPMA_E_PROVIDER);
    EXPECT_TRUE(logged_error("ibv_reg_mr", std::strerror(EACCES)));
}

TEST_F(RegionTest, UnpinnableMemoryWithoutOdp) {
    open(false);
    fake::fail("ibv_reg_mr", EOPNOTSUPP);
    std::shared_ptr<prov::MemoryRegion> mr;
    EXPECT_EQ(reg(&mr), RPMA_E_PROVIDER);
    EXPECT_EQ(fake::calls("ibv_reg_mr"), 1);
    EXPECT_TRUE(logged_error(std::strerror(EOPNOTSUPP), "no On-Demand Paging"));
}

TEST_F(RegionTest, UnpinnableMemoryRetriedWithOdp) {
    open(true);
    fake::fail("ibv_reg_mr", EOPNOTSUPP);
    std::shared_ptr<prov::MemoryRegion> mr;
    ASSERT_EQ(reg(&mr), 0);
    EXPECT_EQ(fake::calls("ibv_reg_mr"), 2);
    EXPECT_TRUE(fake::seen().reg_mr_access & IBV_ACCESS_ON_DEMAND);
    dom_->deregister(mr);
}

TEST_F(RegionTest, OdpRetryFails) {
    open(true);
    fake::fail("ibv_reg_mr", EOPNOTSUPP, 1);
    fake::fail("ibv_reg_mr", ENOMEM, 2);
    std::shared_ptr<prov::MemoryRegion> mr;
    EXPECT_EQ(reg(&mr), RPMA_E_NOMEM);
    EXPECT_TRUE(logged_error("On-Demand Paging", std::strerror(ENOMEM)));
}

// The error code must come from ibv_reg_mr's errno, not from whatever logging left there.
void clobbering_log(rpma_log_level, const char *, const int, const char *, const char *, ...) {
    errno = EBADF;
}

TEST_F(RegionTest, CodeSurvivesALogFunctionThatSetsErrno) {
    open(false);
    rpma::log::set_function(clobbering_log);
    fake::fail("ibv_reg_mr", ENOMEM);
    std::shared_ptr<prov::MemoryRegion> mr;
    EXPECT_EQ(reg(&mr), RPMA_E_NOMEM);
}

struct AdviseCase {
    int err;
    int code;
};

void PrintTo(const AdviseCase &c, std::ostream *os) {
    *os << "errno " << c.err;
}

class AdviseTest : public RegionTest, public ::testing::WithParamInterface<AdviseCase> {};

TEST_P(AdviseTest, MapsTheError) {
    open(true);
    std::shared_ptr<prov::MemoryRegion> mr;
    ASSERT_EQ(reg(&mr), 0);
    fake::fail("ibv_advise_mr", GetParam().err);
    EXPECT_EQ(dom_->advise(*mr, buf_.data(), 64, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                           IBV_ADVISE_MR_FLAG_FLUSH),
              GetParam().code);
    EXPECT_EQ(fake::seen().advise, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE);
    if (GetParam().err) {
        EXPECT_TRUE(logged_error("ibv_advise_mr", std::strerror(GetParam().err)));
    }
    dom_->deregister(mr);
}

INSTANTIATE_TEST_SUITE_P(Codes, AdviseTest,
                         ::testing::Values(AdviseCase{0, 0}, AdviseCase{EOPNOTSUPP, RPMA_E_NOSUPP},
                                           AdviseCase{ENOTSUP, RPMA_E_NOSUPP},
                                           AdviseCase{EFAULT, RPMA_E_INVAL},
                                           AdviseCase{EINVAL, RPMA_E_INVAL},
                                           AdviseCase{EIO, RPMA_E_PROVIDER}));

}  // namespace
}  // namespace rpma::test
