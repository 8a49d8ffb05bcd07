// rpma_peer_cfg_*: default, direct write to PMEM, the 1-byte descriptor, every documented error.
#include <gtest/gtest.h>
#include <librpma.h>

#include <cstdint>

#include "core/peer_cfg.h"
#include "fail_alloc.h"

namespace {

class PeerCfg : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_EQ(rpma_peer_cfg_new(&pcfg_), 0); }
    void TearDown() override { EXPECT_EQ(rpma_peer_cfg_delete(&pcfg_), 0); }
    rpma_peer_cfg *pcfg_ = nullptr;
};

TEST_F(PeerCfg, NewDefaultsToNoDirectWrite) {
    ASSERT_NE(pcfg_, nullptr);
    bool supported = true;
    ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg_, &supported), 0);
    EXPECT_FALSE(supported);
    EXPECT_FALSE(reinterpret_cast<const rpma::PeerCfg *>(pcfg_)->direct_write_to_pmem());
}

TEST(PeerCfgNew, InvalPcfgPtrNull) {
    EXPECT_EQ(rpma_peer_cfg_new(nullptr), RPMA_E_INVAL);
}

TEST(PeerCfgNew, NomemLeavesPcfgPtrAlone) {
    auto *sentinel = reinterpret_cast<rpma_peer_cfg *>(0x1234);
    rpma_peer_cfg *pcfg = sentinel;
    int ret;
    {
        rpma::test::FailAllocations fail;
        ret = rpma_peer_cfg_new(&pcfg);
    }
    EXPECT_EQ(ret, RPMA_E_NOMEM);
    EXPECT_EQ(pcfg, sentinel);
}

TEST(PeerCfgDelete, SetsPointerToNull) {
    rpma_peer_cfg *pcfg = nullptr;
    ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
    EXPECT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
    EXPECT_EQ(pcfg, nullptr);
}

TEST(PeerCfgDelete, NullObjectIsNoop) {
    rpma_peer_cfg *pcfg = nullptr;
    EXPECT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
    EXPECT_EQ(pcfg, nullptr);
}

TEST(PeerCfgDelete, InvalPcfgPtrNull) {
    EXPECT_EQ(rpma_peer_cfg_delete(nullptr), RPMA_E_INVAL);
}

TEST_F(PeerCfg, DirectWriteRoundTrip) {
    bool supported = false;
    ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg_, true), 0);
    ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg_, &supported), 0);
    EXPECT_TRUE(supported);
    EXPECT_TRUE(reinterpret_cast<const rpma::PeerCfg *>(pcfg_)->direct_write_to_pmem());
    ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg_, false), 0);
    ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg_, &supported), 0);
    EXPECT_FALSE(supported);
}

TEST_F(PeerCfg, SetDirectWriteInvalPcfgNull) {
    EXPECT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(nullptr, true), RPMA_E_INVAL);
}

TEST_F(PeerCfg, GetDirectWriteInvalPcfgNull) {
    bool supported = true;
    EXPECT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(nullptr, &supported), RPMA_E_INVAL);
    EXPECT_TRUE(supported);
}

TEST_F(PeerCfg, GetDirectWriteInvalSupportedNull) {
    EXPECT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg_, nullptr), RPMA_E_INVAL);
}

TEST_F(PeerCfg, DescriptorSizeIsOneByte) {
    size_t size = 0;
    ASSERT_EQ(rpma_peer_cfg_get_descriptor_size(pcfg_, &size), 0);
    EXPECT_EQ(size, 1u);
}

TEST_F(PeerCfg, GetDescriptorSizeInvalPcfgNull) {
    size_t size = 99;
    EXPECT_EQ(rpma_peer_cfg_get_descriptor_size(nullptr, &size), RPMA_E_INVAL);
    EXPECT_EQ(size, 99u);
}

TEST_F(PeerCfg, GetDescriptorSizeInvalDescSizeNull) {
    EXPECT_EQ(rpma_peer_cfg_get_descriptor_size(pcfg_, nullptr), RPMA_E_INVAL);
}

TEST_F(PeerCfg, DescriptorBytesAreZeroOrOne) {
    uint8_t buf[3] = {0xaa, 0xaa, 0xaa};
    ASSERT_EQ(rpma_peer_cfg_get_descriptor(pcfg_, buf), 0);
    EXPECT_EQ(buf[0], 0);
    EXPECT_EQ(buf[1], 0xaa);  // exactly one byte written
    ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg_, true), 0);
    ASSERT_EQ(rpma_peer_cfg_get_descriptor(pcfg_, buf), 0);
    EXPECT_EQ(buf[0], 1);
    EXPECT_EQ(buf[1], 0xaa);
}

TEST_F(PeerCfg, GetDescriptorInvalPcfgNull) {
    uint8_t b = 0x55;
    EXPECT_EQ(rpma_peer_cfg_get_descriptor(nullptr, &b), RPMA_E_INVAL);
    EXPECT_EQ(b, 0x55);
}

TEST_F(PeerCfg, GetDescriptorInvalDescNull) {
    EXPECT_EQ(rpma_peer_cfg_get_descriptor(pcfg_, nullptr), RPMA_E_INVAL);
}

TEST(PeerCfgFromDescriptor, RoundTripBothValues) {
    for (bool value : {false, true}) {
        rpma_peer_cfg *src = nullptr, *dst = nullptr;
        ASSERT_EQ(rpma_peer_cfg_new(&src), 0);
        ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(src, value), 0);
        uint8_t desc = 0xff;
        ASSERT_EQ(rpma_peer_cfg_get_descriptor(src, &desc), 0);
        ASSERT_EQ(rpma_peer_cfg_from_descriptor(&desc, sizeof(desc), &dst), 0);
        ASSERT_NE(dst, nullptr);
        EXPECT_NE(dst, src);
        bool got = !value;
        ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(dst, &got), 0);
        EXPECT_EQ(got, value);
        ASSERT_EQ(rpma_peer_cfg_delete(&src), 0);
        ASSERT_EQ(rpma_peer_cfg_delete(&dst), 0);
    }
}

TEST(PeerCfgFromDescriptor, NonZeroByteMeansSupported) {
    const uint8_t desc = 0x80;
    rpma_peer_cfg *pcfg = nullptr;
    ASSERT_EQ(rpma_peer_cfg_from_descriptor(&desc, 1, &pcfg), 0);
    bool got = false;
    ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &got), 0);
    EXPECT_TRUE(got);
    ASSERT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
}

TEST(PeerCfgFromDescriptor, LongerBufferReadsFirstByteOnly) {
    const uint8_t desc[24] = {1};
    rpma_peer_cfg *pcfg = nullptr;
    ASSERT_EQ(rpma_peer_cfg_from_descriptor(desc, sizeof(desc), &pcfg), 0);
    bool got = false;
    ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &got), 0);
    EXPECT_TRUE(got);
    ASSERT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
}

TEST(PeerCfgFromDescriptor, InvalDescNull) {
    auto *sentinel = reinterpret_cast<rpma_peer_cfg *>(0x99);
    rpma_peer_cfg *pcfg = sentinel;
    EXPECT_EQ(rpma_peer_cfg_from_descriptor(nullptr, 1, &pcfg), RPMA_E_INVAL);
    EXPECT_EQ(pcfg, sentinel);
}

TEST(PeerCfgFromDescriptor, InvalPcfgPtrNull) {
    const uint8_t desc = 1;
    EXPECT_EQ(rpma_peer_cfg_from_descriptor(&desc, 1, nullptr), RPMA_E_INVAL);
}

// Not in the man page's list; refusing it avoids reading a byte the caller did not provide.
TEST(PeerCfgFromDescriptor, InvalEmptyDescriptor) {
    const uint8_t desc = 1;
    auto *sentinel = reinterpret_cast<rpma_peer_cfg *>(0x99);
    rpma_peer_cfg *pcfg = sentinel;
    EXPECT_EQ(rpma_peer_cfg_from_descriptor(&desc, 0, &pcfg), RPMA_E_INVAL);
    EXPECT_EQ(pcfg, sentinel);
}

TEST(PeerCfgFromDescriptor, NomemLeavesPcfgPtrAlone) {
    const uint8_t desc = 1;
    auto *sentinel = reinterpret_cast<rpma_peer_cfg *>(0x99);
    rpma_peer_cfg *pcfg = sentinel;
    int ret;
    {
        rpma::test::FailAllocations fail;
        ret = rpma_peer_cfg_from_descriptor(&desc, 1, &pcfg);
    }
    EXPECT_EQ(ret, RPMA_E_NOMEM);
    EXPECT_EQ(pcfg, sentinel);
}

}  // namespace
